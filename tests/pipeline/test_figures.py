"""scripts/figures.py: docs/attention.md's figures drawn from a model through the Python API:
each file written, each plotting what the API returns for the sentence, the numbers the tutorial
states of it (attention_numbers.json) those the API gives, the same files on a rerun, the
explorer's screenshot left out, saying why, where no Chromium is installed, and the tour notebook
run again and saved with its outputs."""

import hashlib
import json
import math

import nbformat
import numpy as np
import pytest

import qkvmt
import qkvmt.pipeline.figures as module
import qkvmt.results.tutorial as tutorial
from qkvmt.errors import UserError
from qkvmt.pipeline.figures import figures
from tests.conftest import compose_inference
from tests.explore.conftest import REFERENCE, SOURCE

FIGURES = [
    "attention_cross.png",
    "attention_flow.png",
    "attention_head.png",
    "attention_links.png",
    "attention_swap.png",
    "attention_values.png",
]
FILES = sorted([*FIGURES, "attention_numbers.json"])
DONOR = "w5 " + SOURCE.split(" ", 1)[1]  # another word in the first one's place


def drawn(trained_run, out, *extra):
    return figures(
        compose_inference(
            "figures",
            f"ckpt_path={trained_run['run'] / 'checkpoints' / 'last.ckpt'}",
            f"output_dir={out}",
            f"sentence='{SOURCE}'",
            f"reference='{REFERENCE}'",
            "head.layer=1",
            "head.head=2",
            "swap.a=0",
            "swap.b=1",
            f"patch.donor='{DONOR}'",
            "patch.position=0",
            "tour=null",
            "lens_record=null",  # drawn from the record: tests/pipeline/test_lens_study.py
            "sinks_record=null",  # likewise: tests/pipeline/test_sinks.py
            "self_record=null",  # likewise
            "tracing_record=null",  # likewise: tests/studies/patching/
            *extra,
        )
    )


def test_every_figure_plots_what_the_api_returns(trained_run, tmp_path, monkeypatch):
    plotted = {}
    for name in ("heatmap_grid", "head_figure", "flow_figure", "links_figure", "swap_figure"):
        draw = getattr(tutorial, name)

        def record(*args, _draw=draw, **kwargs):  # the path is the last positional argument of each
            plotted[args[-1].name] = args
            _draw(*args, **kwargs)

        monkeypatch.setattr(tutorial, name, record)
    result = drawn(trained_run, tmp_path / "figures", "explorer=null")
    assert sorted(result["files"]) == FILES == sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert sorted(plotted) == FIGURES
    assert result["left_out"] == {}

    model = qkvmt.load(trained_run["run"] / "checkpoints" / "last.ckpt", device="cpu")
    head = model.inspect(SOURCE, kind="cross", layer=1, head=2)
    weights, norms, q_tokens, k_tokens = plotted["attention_head.png"][:4]
    np.testing.assert_array_equal(weights, head.weights)
    np.testing.assert_array_equal(norms, head.value_norms)
    assert (q_tokens, k_tokens) == (head.query_tokens, head.key_tokens)

    attention = model.attention(SOURCE)
    cross, values, alti = (attention.map("cross", s) for s in ("weights", "value_norms", "alti"))
    np.testing.assert_array_equal(plotted["attention_cross.png"][0], cross.weights)
    np.testing.assert_array_equal(
        plotted["attention_values.png"][0], values.weights / values.weights.sum(-1, keepdims=True)
    )
    source, share, rows, cols = plotted["attention_flow.png"][:4]
    np.testing.assert_array_equal(source, alti.layers)
    np.testing.assert_array_equal(share, attention.contributions.source_share)
    assert plotted["attention_cross.png"][1:3] == (rows, cols) == (cross.rows, cross.cols)

    maps, titles, rows, cols, marked = plotted["attention_swap.png"][:5]
    swapped = {what: model.intervene(SOURCE, qkvmt.Swap(0, 1, what)) for what in ("keys", "values", "both")}
    np.testing.assert_array_equal(maps[0], swapped["keys"].cross_before[-1].mean(0))
    for shown, (what, result) in zip(maps[1:], swapped.items()):
        np.testing.assert_array_equal(shown, result.cross_after[-1].mean(0))
        assert result.edited in titles[1 + list(swapped).index(what)]
    assert (rows, cols, marked) == (swapped["keys"].original_tokens, swapped["keys"].src_tokens, (0, 1))

    links = model.align(SOURCE, REFERENCE)
    matrix, tgt_words, src_words, pairs = plotted["attention_links.png"][:4]
    np.testing.assert_array_equal(matrix, links.word_matrix)
    assert (tgt_words, src_words, pairs) == (links.tgt_words, links.src_words, links.links)

    numbers = json.loads((tmp_path / "figures" / "attention_numbers.json").read_text(encoding="utf-8"))
    the_numbers_are_what_the_api_gives(numbers, model, attention, head, swapped)


def the_numbers_are_what_the_api_gives(numbers, model, attention, head, swapped):
    """Each number the tutorial states, against the model's config, its methods' returns and, for
    the translation's log-probability, the token probabilities of a separate forced pass."""
    c = model.transformer.cfg
    d_k = c.d_model // c.n_heads
    assert numbers["model"] == {"layers": c.decoder_layers, "heads": c.n_heads, "d_k": d_k, "d_model": c.d_model}
    assert numbers["sqrt_d_k"] == round(math.sqrt(d_k), 2)
    original = swapped["keys"]
    assert numbers["translation"] == original.original
    assert numbers["log_prob"] == pytest.approx(sum(math.log(s.prob) for s in attention.token_scores), abs=1.5e-3)
    cross = attention.map("cross")
    last = cross.weights[-1].mean(0)
    for shown, row, weights in zip(numbers["cross_last_layer"], cross.rows, last, strict=True):
        assert shown == {"row": row, "on": cross.cols[weights.argmax()], "weight": round(float(weights.max()), 2)}
    for shown, row, weights in zip(numbers["head"]["rows"], head.query_tokens, head.weights, strict=True):
        assert shown == {"row": row, "on": head.key_tokens[weights.argmax()], "weight": round(float(weights.max()), 2)}
    row = int(last[:, 0].argmax())  # the row that looks most at the first of the swapped tokens
    assert numbers["row"] == {"token": cross.rows[row], "a": cross.cols[0], "b": cross.cols[1]}
    patched = {what: model.intervene(SOURCE, qkvmt.Patch(DONOR, what, positions=(0,))) for what in ("keys", "values")}
    results = {f"{w} swapped": r for w, r in swapped.items()} | {f"{w} patched": r for w, r in patched.items()}
    assert sorted(numbers["edits"]) == sorted(results)
    for name, result in results.items():
        after = result.cross_after[-1].mean(0)[row]
        assert numbers["edits"][name] == {
            "translation": result.edited,
            "log_prob": round(float(result.log_prob_edited.sum()), 3),
            "log_prob_change": round(float((result.log_prob_edited - result.log_prob).sum()), 3),
            "on_a": [round(float(last[row, 0]), 2), round(float(after[0]), 2)],
            "on_b": [round(float(last[row, 1]), 2), round(float(after[1]), 2)],
        }, name


def test_a_rerun_writes_the_same_files(trained_run, tmp_path):
    def digests(folder):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}

    drawn(trained_run, tmp_path / "a", "explorer=null")
    drawn(trained_run, tmp_path / "b", "explorer=null")
    assert digests(tmp_path / "a") == digests(tmp_path / "b") and len(digests(tmp_path / "a")) == len(FILES)


def test_without_chromium_the_screenshot_is_left_out_saying_why(trained_run, tmp_path, monkeypatch):
    monkeypatch.setattr("qkvmt.explore.screenshot.shutil.which", lambda name: None)
    result = drawn(trained_run, tmp_path, "explorer.layer=1")
    assert sorted(result["files"]) == FILES
    assert "no Chromium" in result["left_out"]["explorer.png"] and not (tmp_path / "explorer.png").exists()


def test_a_missing_sentence_is_one_line_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "load_for_inference", lambda cfg: pytest.fail("loaded the model"))
    with pytest.raises(UserError, match="reference is empty"):
        figures(compose_inference("figures", f"output_dir={tmp_path}", "reference=' '"))


def test_the_tour_notebook_is_run_again_and_saved_with_its_outputs(trained_run, tmp_path):
    notebook = tmp_path / "tour.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, notebook)
    result = drawn(trained_run, tmp_path / "figures", "explorer=null", f"tour={notebook}")
    assert result["files"]["tour.ipynb"] == str(notebook) and result["left_out"] == {}
    cell = nbformat.read(notebook, as_version=4).cells[0]
    assert cell.execution_count == 1 and [o.text for o in cell.outputs] == ["42\n"]

    result = drawn(trained_run, tmp_path / "again", "explorer=null", f"tour={tmp_path / 'missing.ipynb'}")
    assert "tour.ipynb" not in result["files"] and "no notebook at" in result["left_out"]["tour.ipynb"]
