"""An imported folder's weights are read into the model's own memory, tensor by tensor: the values are
safetensors' own, in every dtype, and a model keeps them when its file is rewritten while it runs."""

import pytest
import torch
from safetensors.torch import load_file, save_file

import qkvmt
from qkvmt.hf.safetensors_file import LENGTH, SafetensorsFile
from tests.hf.folders import SMALL, randomized, saved, with_tokenizer

transformers = pytest.importorskip("transformers", reason="transformers is not installed")


def test_each_tensor_read_is_the_one_safetensors_loads_in_its_dtype_and_converted(tmp_path):
    path = tmp_path / "t.safetensors"
    torch.manual_seed(0)
    saved_tensors = {
        f"w.{dtype}": torch.randn(5, 7).to(dtype) for dtype in (torch.float32, torch.float16, torch.bfloat16)
    }
    save_file(saved_tensors | {"empty": torch.zeros(0, 3)}, path)
    file, reference = SafetensorsFile(path), load_file(path)
    for name, tensor in reference.items():
        assert torch.equal(file.read(name), tensor) and file.read(name).dtype == tensor.dtype
        rows = torch.empty(tensor.shape)  # read into float32, as the import does
        file.read_into(name, rows)
        assert torch.equal(rows, tensor.float())


def test_a_file_cut_short_fails_as_it_is_read(tmp_path):
    path = tmp_path / "t.safetensors"
    save_file({"w": torch.ones(64, 64)}, path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="the file ends inside w"):
        SafetensorsFile(path).read("w")


def test_a_loaded_model_keeps_its_weights_when_its_file_is_rewritten(tmp_path):
    config = transformers.MarianConfig(vocab_size=30, pad_token_id=29, decoder_start_token_id=29, **SMALL)
    folder = with_tokenizer(saved(randomized(transformers.MarianMTModel(config)), tmp_path / "marian"))
    model = qkvmt.load(folder, device="cpu").transformer
    loaded = {k: v.clone() for k, v in model.state_dict().items()}
    path = folder / "model.safetensors"
    with open(path, "r+b") as f:  # in place, as a writer that reuses the file would: every value zeroed
        header = LENGTH + int.from_bytes(f.read(LENGTH), "little")
        f.seek(header)
        f.write(bytes(path.stat().st_size - header))
    now = model.state_dict()
    assert all(torch.equal(now[k], v) for k, v in loaded.items())
