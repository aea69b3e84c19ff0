"""Model folders (model.safetensors, tokenizer.json, qkvmt.json): what a checkpoint holds, read
back without pickle, as the same model."""

import json

import pytest
import torch

from qkvmt.errors import UserError
from qkvmt.loading import build_model, load_checkpoint
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.weights_folder import add_provenance, is_weights_folder, write_weights_folder
from qkvmt.text.tokenizer import Specials, train_bpe
from tests.model.test_transformer import make_model


def nontrivial_model(seed: int = 0, **overrides):
    """A 2+2-layer model whose biases and LayerNorm parameters are not their initial 0 and 1;
    `overrides`: other ModelConfig fields (norm_first=True)."""
    words = [f"w{i}" for i in range(30)]
    tokenizer = train_bpe([" ".join(words[i:] + words[:i]) for i in range(30)], vocab_size=60, min_frequency=1)
    model = make_model(
        seed,
        d_model=64,
        ffn_dim=128,
        vocab_size=tokenizer.get_vocab_size(),
        **Specials.of(tokenizer).config_fields(),
        **overrides,
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # biases and LayerNorms
                p.add_(torch.randn_like(p) * 0.3)
    meta = CheckpointMeta(
        model.cfg.to_dict(),
        tokenizer.to_str(),
        "de",
        "en",
        decode={"beam_size": 3},
        alignment={"layer": 1, "head": 0, "full_context": True},
    )
    return model, tokenizer, meta


def outputs(model, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src, tgt = (
        torch.randint(3, model.cfg.vocab_size, (2, 7), generator=g),
        torch.randint(3, model.cfg.vocab_size, (2, 5), generator=g),
    )
    with torch.no_grad():
        return model(src, tgt)[0]


def test_a_float32_folder_is_the_same_model_and_metadata(tmp_path):
    model, tokenizer, meta = nontrivial_model()
    write_weights_folder(model, tokenizer, meta, tmp_path)
    assert is_weights_folder(tmp_path)
    ckpt = load_checkpoint(tmp_path)
    again, tok = build_model(ckpt, tmp_path)
    assert torch.equal(outputs(again), outputs(model))
    assert tok.to_str() == tokenizer.to_str()
    assert CheckpointMeta.from_dict(ckpt["qkvmt"]) == meta


@pytest.mark.parametrize("dtype, tolerance", [("float16", 1e-2), ("bfloat16", 1e-1)])
def test_half_precision_stores_half_the_bytes_and_loads_as_float32(tmp_path, dtype, tolerance):
    model, tokenizer, meta = nontrivial_model()
    for name in ("full", "half"):
        (tmp_path / name).mkdir()
    write_weights_folder(model, tokenizer, meta, tmp_path / "full")
    write_weights_folder(model, tokenizer, meta, tmp_path / "half", dtype)
    full, half = ((tmp_path / n / "model.safetensors").stat().st_size for n in ("full", "half"))
    assert half < 0.55 * full
    again, _ = build_model(load_checkpoint(tmp_path / "half"))
    assert all(p.dtype == torch.float32 for p in again.parameters())
    diff = (outputs(again) - outputs(model)).abs().max().item()
    assert 0 < diff < tolerance  # rounded, and only rounded


def test_provenance_is_kept_and_ignored_by_loading(tmp_path):
    model, tokenizer, meta = nontrivial_model()
    write_weights_folder(model, tokenizer, meta, tmp_path)
    add_provenance(tmp_path, {"experiment": "x", "steps": 3})
    assert json.loads((tmp_path / "qkvmt.json").read_text())["provenance"] == {"experiment": "x", "steps": 3}
    assert CheckpointMeta.from_dict(load_checkpoint(tmp_path)["qkvmt"]) == meta


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 40), "not a readable model folder"),
        (lambda f: (f / "qkvmt.json").write_text("{"), "not a readable model folder"),
        (lambda f: (f / "qkvmt.json").write_text('{"format": "ctranslate2"}'), "format is 'ctranslate2'"),
        (lambda f: (f / "qkvmt.json").write_text('{"format": "safetensors"}'), "no model_config"),
    ],
)
def test_a_damaged_folder_is_a_user_error_naming_it(tmp_path, damage, message):
    model, tokenizer, meta = nontrivial_model()
    write_weights_folder(model, tokenizer, meta, tmp_path)
    damage(tmp_path)
    with pytest.raises(UserError, match=message) as e:
        load_checkpoint(tmp_path)
    assert str(tmp_path) in str(e.value)


def test_tied_weights_are_stored_once_and_tied_again(tmp_path):
    model, tokenizer, meta = nontrivial_model()
    assert model.cfg.tie_embeddings
    write_weights_folder(model, tokenizer, meta, tmp_path)
    unique = {p.data_ptr(): p.numel() for p in model.parameters()}  # parameters() yields a tied one once
    stored = (tmp_path / "model.safetensors").stat().st_size
    assert 4 * sum(unique.values()) <= stored < 4 * sum(unique.values()) + 20_000  # + the header
    again, _ = build_model(load_checkpoint(tmp_path))
    assert torch.equal(outputs(again), outputs(model))
