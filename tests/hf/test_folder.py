"""What qkvmt cannot open in a Hugging Face folder is one line naming it, before anything runs: another
model_type, a config value the blocks cannot compute, weights that do not fit, are missing or left over,
or hold NaN or infinity. And the position tables the import selects equal transformers' own."""

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

import qkvmt
from qkvmt.errors import UserError
from qkvmt.model.positions import sinusoidal_positions
from tests.hf.folders import SMALL, randomized, saved

transformers = pytest.importorskip("transformers", reason="transformers is not installed")


@pytest.fixture
def folder(tmp_path):
    config = transformers.MarianConfig(vocab_size=30, pad_token_id=29, decoder_start_token_id=29, **SMALL)
    return saved(randomized(transformers.MarianMTModel(config)), tmp_path / "marian")


def refused(folder, match: str):
    with pytest.raises(UserError, match=match) as e:
        qkvmt.load(folder, device="cpu")
    assert "\n" not in str(e.value)


def edit_config(folder, **changes):
    path = folder / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def edit_weights(folder, edit):
    path = folder / "model.safetensors"
    weights = load_file(path)
    edit(weights)
    save_file(weights, path, metadata={"format": "pt"})


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(model_type="bart"), 'model_type="bart" cannot be imported; qkvmt opens marian, m2m_100'),
        (dict(activation_function="gelu_new"), 'activation_function="gelu_new"'),
        (dict(decoder_ffn_dim=48), "encoder_ffn_dim=24 and decoder_ffn_dim=48 differ"),
        (dict(d_model=18), "model.d_model=18 is not divisible by model.n_heads=4"),
        (dict(eos_token_id=[0, 1]), "eos_token_id=\\[0, 1\\]"),
    ],
)
def test_a_config_value_the_blocks_cannot_compute_is_named(folder, changes, match):
    edit_config(folder, **changes)
    refused(folder, match)


@pytest.mark.parametrize(
    "setting",
    [dict(no_repeat_ngram_size=3), dict(do_sample=True), dict(repetition_penalty=1.2), dict(min_new_tokens=4)],
)
def test_a_generation_setting_the_search_lacks_is_named(folder, setting):
    (folder / "generation_config.json").write_text(json.dumps(setting))
    ((key, value),) = setting.items()
    refused(folder, f"{key}={json.dumps(value)} is not in qkvmt's search")


def test_weights_that_do_not_fit_are_named(folder):
    edit_config(folder, encoder_ffn_dim=32, decoder_ffn_dim=32)
    refused(folder, r"model.encoder.layers.0.fc1.weight is \(24, 16\), but config.json needs \(32, 16\)")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_weights_holding_nan_or_infinity_are_named(folder, bad):
    edit_weights(folder, lambda w: w["model.decoder.layers.1.encoder_attn.v_proj.bias"].__setitem__(3, bad))
    refused(folder, "model.decoder.layers.1.encoder_attn.v_proj.bias holds NaN or infinity")


def test_a_missing_or_a_foreign_weight_is_named(folder):
    edit_weights(folder, lambda w: w.__setitem__("model.encoder.layernorm_embedding.weight", torch.ones(16)))
    refused(folder, "weight model.encoder.layernorm_embedding.weight has no place in qkvmt's blocks")
    edit_weights(folder, lambda w: w.pop("model.decoder.layers.2.fc2.bias"))
    refused(folder, "no weight model.decoder.layers.2.fc2.bias")


def test_a_tied_copy_that_differs_is_named(folder):
    edit_weights(folder, lambda w: w.__setitem__("lm_head.weight", torch.zeros(30, 16)))
    refused(folder, "lm_head.weight differs from the matrix config.json ties it to")


def test_a_folder_without_tokenizer_files_is_named(folder):
    refused(folder, "has no tokenizer files: it needs Marian's source.spm, target.spm, vocab.json, M2M100's")


@pytest.mark.parametrize("d", [16, 15])
def test_position_tables_are_transformers_own(d):
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    marian = MarianSinusoidalPositionalEmbedding(50, d).create_weight()
    assert torch.allclose(sinusoidal_positions(50, d, "halves"), marian, atol=1e-5)
    pad = 1
    fairseq = M2M100SinusoidalPositionalEmbedding.get_embedding(50 + pad + 1, d, pad)[pad + 1 :]
    assert torch.allclose(sinusoidal_positions(50, d, "fairseq", pad), fairseq, atol=1e-5)


def test_the_import_needs_no_optional_package_until_a_folder_asks_for_one():
    # transformers is never imported at run time; sentencepiece and huggingface_hub only for a folder or name
    # that needs them, so the core install stays as light as it was.
    code = (
        "import sys, qkvmt, qkvmt.api, qkvmt.hf.folder, qkvmt.hf.tokenizers, qkvmt.hf.languages, qkvmt.hf.hub; "
        "print(sorted({'transformers', 'sentencepiece', 'huggingface_hub'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
