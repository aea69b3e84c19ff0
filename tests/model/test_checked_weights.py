"""A model's weights checked wherever they load (checkpoint.checked_model): they must fit the
configuration stored with them and be finite, or the load is one line naming the weight, the
same line from translate and from init_from, whose run has written nothing by then."""

import json
import struct
import sys

import pytest
import torch

from qkvmt.cli.main import main
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.weights_folder import METADATA, WEIGHTS, write_weights_folder
from qkvmt.pipeline.train import train
from qkvmt.text.tokenizer import Specials, train_bpe
from tests.conftest import compose_train, tiny_overrides
from tests.model.test_transformer import make_model

WEIGHT = "encoder_layers.0.self_attn.w_qkv.weight"


def tiny_folder(out):
    """An untrained model folder with model=tiny's settings over the toy corpus's words."""
    words = [f"w{i}" for i in range(30)]
    tokenizer = train_bpe([" ".join(words[i:] + words[:i]) for i in range(30)], vocab_size=60, min_frequency=1)
    fields = Specials.of(tokenizer).config_fields()
    model = make_model(
        0, d_model=64, n_heads=4, ffn_dim=128, max_positions=256, **fields, vocab_size=tokenizer.get_vocab_size()
    )
    out.mkdir(parents=True)
    write_weights_folder(model, tokenizer, CheckpointMeta(model.cfg.to_dict(), tokenizer.to_str(), "de", "en"), out)
    return out


def overwrite(folder, name: str, n_bytes: int) -> None:
    """The first n_bytes of weight `name` in model.safetensors set to 0xFF, as a damaged disk might:
    float32 values that are NaN."""
    path = folder / WEIGHTS
    data = bytearray(path.read_bytes())
    (header_len,) = struct.unpack("<Q", data[:8])
    start = 8 + header_len + json.loads(data[8 : 8 + header_len])[name]["data_offsets"][0]
    data[start : start + n_bytes] = b"\xff" * n_bytes
    path.write_bytes(bytes(data))


def damaged(tmp_path, fault: str):
    """A model folder with NaN in one weight, or whose qkvmt.json says d_model 96 over d_model 64 weights."""
    folder = tiny_folder(tmp_path / fault)
    if fault == "nan":
        overwrite(folder, WEIGHT, 4096)
    else:
        meta = json.loads((folder / METADATA).read_text())
        meta["model_config"]["d_model"] = 96
        (folder / METADATA).write_text(json.dumps(meta))
    return folder


def translate_error(folder, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(["translate", f"ckpt_path={folder}", "sentence=w1 w2 w3", "fabric.accelerator=cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and "Traceback" not in "\n".join(err)
    return err[-1]


def test_weights_holding_nan_are_one_line_naming_the_weight_and_the_values(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["qkvmt"])  # main sets it, as the command line it runs
    folder = damaged(tmp_path, "nan")
    assert torch.isnan(torch.tensor(struct.unpack("<f", b"\xff" * 4))).all()  # what the bytes decode to
    assert translate_error(folder, capsys) == (
        f"error: {folder}: weight {WEIGHT} holds NaN or infinity (1024 values): the file is corrupt, or was saved "
        "from a run that diverged; use a checkpoint written by qkvmt train or qkvmt average"
    )


@pytest.mark.parametrize("fault", ["nan", "misfit"])
def test_init_from_refuses_the_weights_translate_refuses_before_the_run_writes_anything(
    tmp_path, corpus, capsys, monkeypatch, fault
):
    monkeypatch.setattr(sys, "argv", ["qkvmt"])
    folder = damaged(tmp_path, fault)
    out = tmp_path / "run"
    settings = ["model.d_model=96"] if fault == "misfit" else []  # the run asks for what qkvmt.json says
    with pytest.raises(UserError) as refused:
        train(compose_train(*tiny_overrides(corpus, out), f"init_from={folder}", *settings))
    assert translate_error(folder, capsys) == f"error: {refused.value}"
    assert ("NaN or infinity" if fault == "nan" else "the weights do not fit") in str(refused.value)
    assert not out.exists()


def test_the_weights_file_of_a_model_folder_says_to_give_the_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["qkvmt"])
    folder = tiny_folder(tmp_path / "model")
    assert translate_error(folder / WEIGHTS, capsys) == (
        f"error: {folder / WEIGHTS} is the weights file of a model folder, which loads as a whole: give the folder "
        f"{folder} instead (model.safetensors with tokenizer.json and qkvmt.json beside it)"
    )
