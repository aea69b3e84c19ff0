"""One sentence's forced pass, shown and saved: every registered signal in its page and in
attention.npz with no edit of the view."""

import json
import re

import numpy as np
import pytest

from qkvmt.analysis.forced import KINDS, forced_attention
from qkvmt.loading import load_model
from qkvmt.results.sentence_attention import SentenceAttention
from tests.analysis.throwaway import PER_LAYER, WHOLE, throwaway_signals


@pytest.fixture(scope="module")
def loaded(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    return model, tok


def test_every_signal_is_on_the_page_and_in_attention_npz(loaded, tmp_path):
    model, tok = loaded
    with throwaway_signals():
        sa = SentenceAttention.of(forced_attention(model, tok, "w1 w2 w3", "t4 t3 t2"))
        sa.save(tmp_path / "a")
        page = sa.html()
    saved = np.load(tmp_path / "a" / "attention.npz")
    for kind in KINDS:  # the weights by kind, as always; value norms per head and per layer, as always
        np.testing.assert_array_equal(saved[kind], sa.map(kind).weights)
        np.testing.assert_array_equal(saved[f"{kind}_value_norms"], sa.map(kind, "value_norms").weights)
        np.testing.assert_array_equal(saved[f"{kind}_value_norms_layer"], sa.map(kind, "value_norms").layers)
        np.testing.assert_array_equal(saved[f"{kind}_{PER_LAYER}_layer"], sa.map(kind, PER_LAYER).layers)
        assert f"{kind}_{PER_LAYER}" not in saved  # no maps per head
    np.testing.assert_array_equal(saved[f"cross_{WHOLE}_layer"], sa.map("cross", WHOLE).layers)
    assert f"encoder_{WHOLE}_layer" not in saved and list(saved["out_tokens"]) == sa.out_tokens
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    viewer = data["samples"][0]["attention"]
    for kind in KINDS:
        assert set(viewer[kind]["signals"]) == {s for s in sa.signals[1:] if kind in sa.signal_maps[s]}
    shown = viewer["cross"]["signals"][WHOLE]
    assert shown["label"] == "probe, whole model" and shown["maps"] is None
    np.testing.assert_allclose(shown["layers"], sa.map("cross", WHOLE).layers, atol=1e-4)
