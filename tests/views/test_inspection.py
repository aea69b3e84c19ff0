"""The Q/K/V inspector: dumped vectors reproduce the head's output and the forward pass."""

import json
import math

import numpy as np
import pytest
import torch

from qkvmt.errors import UserError
from qkvmt.model.checkpoint import load_model
from qkvmt.pipeline.inspect_attention import inspect_attention
from qkvmt.views.inspection import inspect_head
from tests.conftest import compose_inference


@pytest.fixture(scope="module")
def loaded(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    return model, tok


@pytest.mark.parametrize("kind,layer,head", [("encoder", 0, 1), ("decoder", 1, 0), ("cross", -1, 3), ("cross", 0, 2)])
def test_recomputing_from_dumped_qkv_reproduces_the_head(loaded, kind, layer, head):
    model, tok = loaded
    d = json.loads(
        json.dumps(inspect_head(model, tok, "w1 w2 w3 w4", "t4 t3 t2", kind, layer, head).to_dict())
    )  # as dumped
    q, k, v = (np.array(d[x]) for x in ("q", "k", "v"))
    scores = q @ k.T / math.sqrt(d["d_k"])
    if kind == "decoder":  # causal: a query sees its own and earlier positions
        scores = np.where(np.tril(np.ones_like(scores)) > 0, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights @ v, np.array(d["output"]), atol=1e-5)
    np.testing.assert_allclose(weights, np.array(d["weights"]), atol=1e-5)
    # ... and the dump is what the model computed in its own forward pass:
    assert d["check"]["output_max_abs_diff"] < 1e-5
    src = torch.tensor([tok.encode("w1 w2 w3 w4").ids + [2]])
    tgt = torch.tensor([[1] + tok.encode("t4 t3 t2").ids])
    _, att = model(src, tgt, need_weights=True)
    forward = getattr(att, kind)[layer][0, head].detach().numpy()
    np.testing.assert_allclose(np.array(d["weights"]), forward, atol=1e-5)
    assert len(d["top_k"]) == len(d["query_tokens"]) and all(len(t) == 3 for t in d["top_k"])


def test_bad_kind_layer_or_head_is_a_user_error(loaded):
    model, tok = loaded
    for kind, layer, head in (("self", 0, 0), ("cross", 5, 0), ("cross", 0, 9)):
        with pytest.raises(UserError):
            inspect_head(model, tok, "w1", "t1", kind, layer, head)


def test_inspect_writes_json_and_html(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    cfg = compose_inference(
        "inspect_attention",
        f"ckpt_path={ckpt}",
        "sentence='w1 <b>w2</b>'",
        "kind=cross",
        "layer=0",
        "head=1",
        f"output_dir={tmp_path}",
    )
    result = inspect_attention(cfg)
    data = json.loads((tmp_path / "inspect.json").read_text())
    assert data["kind"] == "cross" and data["layer"] == 0 and data["head"] == 1
    assert result["check"]["output_max_abs_diff"] < 1e-5
    html = (tmp_path / "inspect.html").read_text()
    assert "<b>w2</b>" not in html
