"""The inspector's result: inspect.json holds the head's numbers as computed, masked scores as
null, and the inspect command writes the JSON and an HTML page that shows text as text."""

import json

import numpy as np
import pytest

from qkvmt.analysis.inspection import inspect_head
from qkvmt.loading import load_model
from qkvmt.pipeline.inspect_attention import inspect_attention
from qkvmt.results.inspection import HeadInspection
from tests.conftest import compose_inference


@pytest.fixture(scope="module")
def loaded(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    return model, tok


@pytest.mark.parametrize("kind", ["decoder", "cross"])
def test_inspect_json_holds_the_heads_numbers(loaded, kind):
    model, tok = loaded
    head = inspect_head(model, tok, "w1 w2 w3 w4", "t4 t3 t2", kind, 1, 2)
    d = json.loads(json.dumps(HeadInspection.of(head).to_dict()))  # as dumped
    for name in ("q", "k", "v", "weights", "output", "value_norms", "contributions"):
        np.testing.assert_allclose(np.array(d[name]), getattr(head, name), rtol=1e-6)
    scores = np.array([[-np.inf if s is None else s for s in row] for row in d["scores"]])
    np.testing.assert_allclose(scores, head.scores, rtol=1e-6)
    assert (None in d["scores"][0]) == (kind == "decoder")  # a decoder query's future keys: null
    assert d["top_k"] == [[{"key": t.key, "token": t.token, "weight": t.weight} for t in row] for row in head.top_k]
    assert (d["kind"], d["layer"], d["head"], d["query_tokens"]) == (kind, 1, 2, head.query_tokens)


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
