"""A bundled model exported to Hugging Face (qkvmt export format=huggingface) and imported again: the
import reads what the export wrote, so the model translates as it did."""

from dataclasses import asdict

import pytest

import qkvmt
from qkvmt.export.to_huggingface import export_huggingface

pytest.importorskip("transformers", reason="transformers is not installed")

LINES = [
    "Ein Mann fährt Fahrrad .",
    "Zwei Hunde spielen im Schnee auf einer Wiese .",
    "Eine Frau mit einem roten Hut liest ein Buch im Park .",
    "Kinder .",
]


def test_a_bundled_model_exported_and_imported_again_translates_identically(tmp_path):
    ours = qkvmt.load("multi30k-de-en", device="cpu")
    export_huggingface(ours.transformer, ours.tokenizer, ours.meta, tmp_path / "hf")
    back = qkvmt.load(tmp_path / "hf", device="cpu")
    assert back.transformer.cfg.sinusoidal_layout == "halves"  # Marian's table, the residual renamed to fit it
    # The folder says what transformers' generate does; our own decoding (lengths from the source's) is given.
    settings = asdict(ours.decoding())
    assert list(back.translate(LINES, **settings)) == list(ours.translate(LINES))
    assert back.translate(LINES, **settings).ids == ours.translate(LINES).ids
