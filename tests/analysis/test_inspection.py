"""The Q/K/V inspector's numbers: its Q, K and V reproduce the head's weights and output, those
are the model's own forward pass, and its rows are labelled as the maps label them."""

import math

import numpy as np
import pytest
import torch

from qkvmt.analysis.forced import KINDS, forced_attention
from qkvmt.analysis.inspection import inspect_head
from qkvmt.errors import UserError
from qkvmt.loading import load_model


@pytest.fixture(scope="module")
def loaded(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    return model, tok


@pytest.mark.parametrize("kind,layer,head", [("encoder", 0, 1), ("decoder", 1, 0), ("cross", -1, 3), ("cross", 0, 2)])
def test_recomputing_from_q_k_and_v_reproduces_the_head(loaded, kind, layer, head):
    model, tok = loaded
    d = inspect_head(model, tok, "w1 w2 w3 w4", "t4 t3 t2", kind, layer, head)
    q, k, v = (x.astype(np.float64) for x in (d.q, d.k, d.v))
    scores = q @ k.T / math.sqrt(d.d_k)
    if kind == "decoder":  # causal: a query sees its own and earlier positions
        scores = np.where(np.tril(np.ones_like(scores)) > 0, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights @ v, d.output, atol=1e-5)
    np.testing.assert_allclose(weights, d.weights, atol=1e-5)
    # ... and the head is what the model computed in its own forward pass:
    assert d.check["output_max_abs_diff"] < 1e-5
    src = torch.tensor([tok.encode("w1 w2 w3 w4").ids + [2]])
    tgt = torch.tensor([[1] + tok.encode("t4 t3 t2").ids])
    _, att = model(src, tgt, need_weights=True)
    forward = getattr(att, kind)[layer][0, head].detach().numpy()
    np.testing.assert_allclose(d.weights, forward, atol=1e-5)
    assert len(d.top_k) == len(d.query_tokens) and all(len(t) == 3 for t in d.top_k)


def test_bad_kind_layer_or_head_is_a_user_error(loaded):
    model, tok = loaded
    for kind, layer, head in (("self", 0, 0), ("cross", 5, 0), ("cross", 0, 9)):
        with pytest.raises(UserError):
            inspect_head(model, tok, "w1", "t1", kind, layer, head)


@pytest.mark.parametrize("kind", KINDS)
def test_the_inspector_labels_rows_as_the_maps_do(loaded, kind):
    model, tok = loaded
    d = inspect_head(model, tok, "w1 w2 w3", "t4 t3 t2", kind, 0, 1)
    m = forced_attention(model, tok, "w1 w2 w3", "t4 t3 t2").map(kind)
    assert (d.query_tokens, d.key_tokens) == (m.rows, m.cols)
    np.testing.assert_allclose(d.weights, m.weights[0, 1], atol=1e-5)
