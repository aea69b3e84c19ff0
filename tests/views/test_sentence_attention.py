"""Forced attention as typed maps with one row convention, for every path that shows it."""

import numpy as np
import pytest

from qkvmt.model.checkpoint import load_model
from qkvmt.views.inspection import inspect_head
from qkvmt.views.sentence_attention import KINDS, AttentionMap, forced_attention
from qkvmt.text.tokenizer import encode


@pytest.fixture(scope="module")
def loaded(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    return model, tok


def test_decoder_rows_are_named_by_the_token_they_predict(loaded):
    model, tok = loaded
    sa = forced_attention(model, tok, "w1  w2 w3 ", "t4 t3 t2")
    ids = encode(tok, ["t4 t3 t2"])[0]
    names = [tok.id_to_token(i) for i in ids]
    assert sa.out_tokens == names + ["</s>"] and sa.tgt_tokens == ["<s>"] + names
    assert sa.src_tokens == [tok.id_to_token(i) for i in encode(tok, ["w1 w2 w3"])[0]] + ["</s>"]
    maps = {m.kind: m for m in sa.maps()}
    assert list(maps) == list(KINDS)
    assert (maps["cross"].rows, maps["cross"].cols) == (sa.out_tokens, sa.src_tokens)
    assert (maps["decoder"].rows, maps["decoder"].cols) == (sa.out_tokens, sa.tgt_tokens)
    assert (maps["encoder"].rows, maps["encoder"].cols) == (sa.src_tokens, sa.src_tokens)
    # Causality pins the convention: the row predicting y_1 sees only <s>.
    assert np.allclose(maps["decoder"].weights[:, :, 0, 1:], 0) and np.allclose(maps["decoder"].weights[:, :, 0, 0], 1)


@pytest.mark.parametrize("kind", KINDS)
def test_the_inspector_labels_rows_as_the_maps_do(loaded, kind):
    model, tok = loaded
    d = inspect_head(model, tok, "w1 w2 w3", "t4 t3 t2", kind, 0, 1)
    m = forced_attention(model, tok, "w1 w2 w3", "t4 t3 t2").map(kind)
    assert (d.query_tokens, d.key_tokens) == (m.rows, m.cols)
    np.testing.assert_allclose(d.weights, m.weights[0, 1], atol=1e-5)


def test_a_map_refuses_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="2 row and 3 column labels"):
        AttentionMap("cross", np.zeros((1, 1, 3, 3)), ["a", "b"], ["x", "y", "z"])


def test_value_norms_are_the_weights_scaled_by_what_each_value_adds(loaded):
    model, tok = loaded
    sa = forced_attention(model, tok, "w1 w2 w3", "t4 t3 t2")
    assert sa.signals == ["weights", "value_norms", "alti"]
    for kind in KINDS:
        w, vn = sa.map(kind), sa.map(kind, "value_norms")
        assert vn.weights.shape == w.weights.shape and vn.layers.shape == (w.weights.shape[0], *w.weights.shape[2:])
        assert (vn.rows, vn.cols, vn.signal) == (w.rows, w.cols, "value_norms")
        # ‖α W_O v‖ = α ‖W_O v‖: zero exactly where the weight is (the decoder's future keys), and
        # one factor per key, shared by every query of a head
        assert ((vn.weights == 0) == (w.weights == 0)).all()
        ratio = vn.weights / np.where(w.weights > 0, w.weights, np.nan)
        np.testing.assert_allclose(np.nanmax(ratio, axis=2), np.nanmin(ratio, axis=2), rtol=1e-4)
    with pytest.raises(ValueError, match="no 'alti' maps of encoder attention here"):
        sa.map("encoder", "alti")  # ALTI+ is about what reaches the predictions: cross only
    assert [m.kind for m in sa.maps("alti")] == ["cross"]
