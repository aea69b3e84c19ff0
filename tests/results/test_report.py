"""The HTML pages (report.html, the alignment and inspector pages): hostile text shown as
text, and (in headless Chromium, where installed) maps that the page's script really draws."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess

import numpy as np
import pytest

from qkvmt.analysis.forced import AttentionMap
from qkvmt.analysis.inspection import TopKey
from qkvmt.results.inspection import HeadInspection
from qkvmt.results.report import ReportSample, attention_report
from qkvmt.results.sentence_alignment import SentenceAlignment
from tests.analysis.throwaway import PER_LAYER, WHOLE, throwaway_signals

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Payloads that alter the DOM if they ever run, and classic ones that must not appear raw.
MARK = "document.body.setAttribute('data-pwned','{}')"
PWN_IMG = f'<img src=x onerror="{MARK.format(1)}">'
PWN_SCRIPT = f"<script>{MARK.format(2)}</script>"
ALERT_SCRIPT = "<script>alert(1)</script>"
BREAKOUT = "</script><img src=x onerror=alert(2)>"
SRC = ["Ein", PWN_IMG, "Mann", "&", ALERT_SCRIPT]  # 5 source tokens
TGT = ["<s>", "A", PWN_SCRIPT, BREAKOUT]  # 4 target tokens as the decoder read them
OUT = ["A", PWN_SCRIPT, BREAKOUT, "</s>"]  # what each decoder row predicts: the rows' labels
L, H = 2, 3


def weights(*shape, seed=0):
    w = np.random.default_rng(seed).random(shape) ** 3
    return w / w.sum(-1, keepdims=True)


def report_inputs():
    metrics = {
        "bleu": 35.1234,
        "chrf": 60.5,
        "bleu_lc": 36.0,
        "bleu_tok_lc": 38.25,
        "n": 2,
        "signatures": {"bleu": "nrefs:1|case:mixed|eff:no|tok:13a", "chrf": "nrefs:1|nc:6", "bleu_lc": "case:lc"},
        "decode": {"beam": 4, "alpha": 0.6},
        "checkpoints": [{"path": "runs/a/<b>best</b>.ckpt", "sha256": "ab" * 32}],
    }
    sample = ReportSample(
        source=f"Ein Mann {PWN_IMG} & {ALERT_SCRIPT}",
        reference=f"A man {PWN_SCRIPT}",
        target=f"A man {BREAKOUT} & co",
        maps=[
            AttentionMap("encoder", weights(L, H, 5, 5), SRC, SRC),
            AttentionMap("decoder", weights(L, H, 4, 4), OUT, TGT),
            AttentionMap("cross", weights(L, H, 4, 5), OUT, SRC),
        ],
    )
    return metrics, [sample, dataclasses.replace(sample, source="second")]


def alignment_inputs(**changes):
    return (
        SentenceAlignment(
            source=f"Ein {PWN_IMG} {ALERT_SCRIPT}",
            translation=f"A {BREAKOUT} & {PWN_SCRIPT}",
            forced=False,
            src_tokens=SRC,
            tgt_tokens=OUT,
            src_words=["Ein", PWN_IMG, ALERT_SCRIPT],
            tgt_words=["A", BREAKOUT, PWN_SCRIPT],
            src_word_groups=[[0], [1], [4]],
            tgt_word_groups=[[0], [1], [2]],
            cross=weights(L, H, 4, 5),
            full_context_layer=None,
            policy={"layer": 0, "head": 2, "rows": "predicting"},
            word_matrix=weights(3, 3),
            links=[(0, 0), (1, 2), (2, 1)],
        )
        if not changes
        else dataclasses.replace(alignment_inputs(), **changes)
    )


def inspector_inputs():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(4, 5))
    scores[0, 3:] = -np.inf  # masked positions must survive as null (None), not break the JSON
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return HeadInspection(
        kind="cross",
        layer=0,
        head=2,
        d_k=8,
        source="Ein Mann",
        target="A man",
        query_tokens=OUT,
        key_tokens=SRC,
        q=rng.normal(size=(4, 8)),
        k=rng.normal(size=(5, 8)),
        v=rng.normal(size=(5, 8)),
        scores=scores,
        weights=w,
        output=rng.normal(size=(4, 8)),
        value_norms=rng.random(5) * 3,
        top_k=[[TopKey(int(j), SRC[j], float(row[j])) for j in np.argsort(-row)[:2]] for row in w],
        check={"output_max_abs_diff": 0.0},
    )


def defang(x):
    """The alert() payloads as DOM-marking ones: for the browser, where a dialog would hang Chromium."""
    if isinstance(x, str):
        return x.replace("alert(1)", MARK.format(3)).replace("alert(2)", '"' + MARK.format(4) + '"')
    if isinstance(x, (list, tuple)):
        return type(x)(defang(v) for v in x)
    if dataclasses.is_dataclass(x):
        return dataclasses.replace(x, **{f.name: defang(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init})
    return {k: defang(v) for k, v in x.items()} if isinstance(x, dict) else x


def write_page(kind, path, browser=False):
    inputs = {"report": report_inputs, "alignment": alignment_inputs, "inspector": inspector_inputs}[kind]()
    inputs = defang(inputs) if browser else inputs
    if kind == "report":
        attention_report(path, *inputs)
    else:
        inputs.save(path)  # the .html of the result's files
    return path.read_text(encoding="utf-8")


def data_block(page: str):
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))


# ---------------------------------------------------------------- HTML, statically


@pytest.mark.parametrize("kind", ["report", "alignment", "inspector"])
def test_pages_show_hostile_text_only_escaped(kind, tmp_path):
    page = write_page(kind, tmp_path / f"{kind}.html")
    for raw in ("<script>alert", "<img src=x", "<script>document", "</script><img"):
        assert raw not in page
    # Exactly the template's two scripts: the JSON data and the code; nothing broke out.
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "&lt;script&gt;alert(1)" in page or "&lt;script&gt;document" in page  # text written by Python
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page  # tokens in the JSON
    assert "\\u003cimg src=x onerror" in page and "\\u0026" in page
    # No address to fetch: the one URL-like string is the SVG namespace the curve's elements need
    no_ns = page.replace('"http://www.w3.org/2000/svg"', "")
    assert "innerHTML" not in page and "http://" not in no_ns and "https://" not in no_ns
    # The escapes mean nothing to JSON: the page's script gets the original strings back.
    data = data_block(page)
    viewer = {
        "report": lambda: data["samples"][0]["attention"]["cross"],
        "alignment": lambda: data["attention"]["cross"],
        "inspector": lambda: {"cols": data["key_tokens"]},
    }[kind]()
    assert viewer["cols"] == SRC


def test_report_json_is_rounded_and_metrics_carry_signatures(tmp_path):
    page = write_page("report", tmp_path / "report.html")
    sample = data_block(page)["samples"][0]
    cross = np.asarray(sample["attention"]["cross"]["maps"])
    assert cross.shape == (L, H, 4, 5) and sample["attention"]["cross"]["rows"] == OUT
    assert sample["attention"]["decoder"]["rows"] == OUT and sample["attention"]["decoder"]["cols"] == TGT
    np.testing.assert_allclose(cross, report_inputs()[1][0].maps[2].weights, atol=5e-5)
    json_text = re.search(r'id="data">(.*?)</script>', page, re.S).group(1)
    assert re.search(r"\d\.\d{4}", json_text) and not re.search(r"\d\.\d{5}", json_text)
    for text in (
        "35.12",
        "60.50",
        "38.25",
        "nrefs:1|case:mixed|eff:no|tok:13a",
        "case:lc",
        "runs/a/&lt;b&gt;best&lt;/b&gt;.ckpt",
        "ab" * 32,
        "beam",
        "Sample 2",
    ):
        assert text in page


def test_alignment_page_shows_pharaoh_links_and_policy(tmp_path):
    page = write_page("alignment", tmp_path / "alignment.html")
    assert "0-0 1-2 2-1" in page and "layer 0, head 2, rows predicting" in page
    data = data_block(page)
    assert data["links"] == [[0, 0], [1, 2], [2, 1]] and np.asarray(data["attention"]["cross"]["maps"]).shape == (
        L,
        H,
        4,
        5,
    )
    with pytest.raises(ValueError, match="word_matrix"):
        alignment_inputs(word_matrix=weights(2, 3)).save(tmp_path / "bad.html")
    assert not (tmp_path / "bad.html").exists()


def test_inspector_page_tables_topk_and_masked_scores(tmp_path):
    inputs = inspector_inputs()
    page = write_page("inspector", tmp_path / "inspector.html")
    assert f"<td>{inputs.v[4][7]:.3f}</td>" in page and f"<td>{inputs.output[3][0]:.3f}</td>" in page
    assert f"({inputs.top_k[1][0].weight:.3f})" in page
    data = data_block(page)
    assert data["scores"][0][3] is None and data["scores"][0][0] == round(float(inputs.scores[0][0]), 4)
    assert inputs.to_dict()["scores"][0][3] is None  # inspect.json: null where masked


# ---------------------------------------------------------------- HTML, in a browser


def dump_dom(page, tmp_path) -> str:
    """The DOM after the page's script ran, from headless Chromium (skips where none is installed)."""
    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if binary is None:
        pytest.skip("no headless Chromium on PATH (Debian: apt-get install chromium); CI installs it")
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        page.as_uri(),
    ]
    # Own process group, so a hang (e.g. a payload's alert() dialog) kills every Chromium process.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("Chromium did not finish within 60 s (did a payload open a dialog?)")
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out.decode("utf-8")


def assert_not_pwned(dom: str, page_kind: str):
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert f'data-drawn="{page_kind}"' in body  # the script ran to the end ...
    assert not re.search(r"\sdata-pwned=", dom)  # ... and no payload did


def options(dom: str, cls: str) -> list[str]:
    return re.findall(r"<option[^>]*>(.*?)</option>", re.search(rf'<select class="{cls}">(.*?)</select>', dom).group(1))


def test_report_draws_maps_and_runs_no_payload_in_chromium(tmp_path):
    page = tmp_path / "report.html"
    write_page("report", page, browser=True)
    dom = dump_dom(page, tmp_path)
    assert_not_pwned(dom, "report")
    # One viewer per sample, defaulting to cross attention: 4 target rows × 5 source columns.
    assert dom.count('data-cells="20"') == 2 and dom.count('data-shown="cross 1 mean"') == 2  # last layer
    table = re.search(r'<table class="heatmap">(.*?)</table>', dom, re.S).group(1)
    assert table.count("<td") == 20 and table.count('class="col"') == 5
    # Hostile tokens arrive as text nodes (serialised escaped), in the labels and the tooltips.
    assert "&lt;img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"&gt;" in table
    assert "&lt;script&gt;document.body.setAttribute('data-pwned','2')&lt;/script&gt;" in table
    assert re.search(r'title="A → Ein: \d\.\d{3}"', table)  # the hover text: the row predicting "A"
    assert not re.search(r'title="(&lt;|<)s(&gt;|>) →', table)  # rows are named by what they predict
    assert options(dom, "kind") == ["encoder self", "decoder self", "cross"]
    assert options(dom, "layer") == ["layer 0", "layer 1"]  # counted as in the config and CLI
    assert options(dom, "head") == ["average over heads", "head 0", "head 1", "head 2"]


def test_alignment_and_inspector_draw_in_chromium(tmp_path):
    page = tmp_path / "alignment.html"
    write_page("alignment", page, browser=True)
    dom = dump_dom(page, tmp_path)
    assert_not_pwned(dom, "alignment")
    words = re.search(r'<div id="words" data-cells="9" data-links="3">(.*?)</table>', dom, re.S).group(1)
    assert words.count('class="link"') == 3
    assert re.search(r'<div id="subwords" data-shown="cross 0 2">.*data-cells="20"', dom, re.S)  # the policy's head
    assert len(options(dom, "layer")) == L and len(options(dom, "head")) == H + 1

    page = tmp_path / "inspector.html"
    write_page("inspector", page, browser=True)
    dom = dump_dom(page, tmp_path / "second")
    assert_not_pwned(dom, "inspector")
    assert 'data-cells="20"' in dom and "(score masked)" in dom and "(score " in dom


def test_empty_translation_still_gives_pictures_and_page(tmp_path):
    """An empty translation has no target tokens; JSON then holds [] for its matrices."""
    empty = alignment_inputs(
        translation="",
        tgt_tokens=[],
        tgt_words=[],
        tgt_word_groups=[],
        links=[],
        cross=np.zeros((L, H, 0, 5)),
        word_matrix=np.zeros((0, 3)),
    )
    empty.save(tmp_path / "empty")
    assert (tmp_path / "empty" / "alignment.png").read_bytes().startswith(b"\x89PNG")
    assert data_block((tmp_path / "empty" / "alignment.html").read_text())["word_matrix"] == []
    assert json.loads((tmp_path / "empty" / "alignment.json").read_text())["pharaoh"] == ""


def test_report_shows_sentence_scores_links_and_the_validation_curve_in_chromium(tmp_path):
    from qkvmt.alignment.policy import WordAlignment

    metrics, samples = report_inputs()
    words = WordAlignment(
        src_words=["Ein", PWN_IMG, "Mann"],
        tgt_words=["A", PWN_SCRIPT],
        src_groups=[[0], [1], [2]],
        tgt_groups=[[0], [1]],
        matrix=weights(2, 3),
        links=[(0, 0), (2, 1)],
    )
    samples = [
        dataclasses.replace(s, scores={"bleu": 12.345, "chrf": 45.678}, alignment=words) for s in defang(samples)
    ]
    curve = [
        {"step": 500, "bleu": 13.4, "chrf": 31.5},
        {"step": 1000, "bleu": 30.2, "chrf": 49.6},
        {"step": 1500, "bleu": 35.2, "chrf": None},
    ]
    policy = {"layer": 0, "head": 2, "rows": "predicting", "direction": "target_to_source"}
    page = tmp_path / "report.html"
    attention_report(page, defang(metrics), samples, curve, {"sentence_bleu": "eff:yes"}, policy)
    dom = dump_dom(page, tmp_path)
    assert_not_pwned(dom, "report")
    assert dom.count("BLEU 12.3 · chrF 45.7") == 2 and "eff:yes" in dom
    assert dom.count('data-shown="cross 0 2"') == 2  # the viewer opens on the policy's head
    maps = re.findall(r'data-align="\d" data-cells="6" data-links="2">(.*?)</table>', dom, re.S)
    assert len(maps) == 2 and all(m.count('class="link"') == 2 for m in maps)
    linked = re.findall(r'<td [^>]*title="([^"]*)"[^>]*class="link"|<td [^>]*class="link"[^>]*title="([^"]*)"', maps[0])
    titles = [a or b for a, b in linked]  # links (source 0, target 0) and (source 2, target 1)
    assert any(t.startswith("A → Ein:") for t in titles) and any(
        t.startswith("&lt;script") and "→ Mann:" in t for t in titles
    )
    assert (
        'data-points="3"' in dom
        and "step 1000: BLEU 30.20, chrF 49.60" in dom
        and "step 1500: BLEU 35.20</title>" in dom
    )


def test_report_without_a_curve_or_alignment_draws_neither(tmp_path):
    page = tmp_path / "report.html"
    write_page("report", page)
    text = page.read_text(encoding="utf-8")
    assert '<div id="curve"' not in text and 'data-align="' not in text and data_block(text)["curve"] == []


# ---------------------------------------------------------------- HTML, clicked in a browser


def test_the_viewer_switches_between_weights_and_value_norms_by_clicking(browser, tmp_path):
    metrics, samples = report_inputs()
    w = samples[0].maps
    norms = [
        AttentionMap(m.kind, m.weights * 3.0, m.rows, m.cols, "value_norms", layer_maps=m.weights.sum(axis=1) * 2.0)
        for m in w
    ]
    sample = dataclasses.replace(defang(samples[0]), signals={"value_norms": defang(norms)})
    path = tmp_path / "report.html"
    attention_report(path, defang(metrics), [sample])
    page = browser.new_page()
    page.goto(path.as_uri())
    viewer = page.locator('[data-sample="0"]')
    assert viewer.get_attribute("data-shown") == "cross 1 mean"  # weights, the last layer's head average
    viewer.locator("select.signal").select_option("value_norms")
    assert viewer.get_attribute("data-shown") == "cross 1 mean value_norms"
    assert viewer.locator("select.head option").first.inner_text() == "the layer as a whole"
    first = viewer.locator("table.heatmap td").first  # row "A", column "Ein"
    shown = lambda x: f"A → Ein: {round(float(x), 4):.3f}"  # noqa: E731  (as the page: 4 decimals in its JSON, 3 shown)
    assert first.get_attribute("title") == shown(norms[2].layers[1][0][0])  # the layer map, not a mean
    viewer.locator("select.head").select_option("2")
    assert first.get_attribute("title") == shown(norms[2].weights[1][2][0][0])
    legend = viewer.locator(".legend span").last.inner_text()
    assert float(legend) == pytest.approx(
        round(float(norms[2].weights[1][2].max()), 3), abs=1e-3
    )  # scaled to its largest
    viewer.locator("select.signal").select_option("weights")
    assert viewer.get_attribute("data-shown") == "cross 1 2" and first.get_attribute("title") == shown(
        w[2].weights[1][2][0][0]
    )
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None


def test_the_viewer_shows_a_signal_without_heads_and_one_of_the_whole_model(browser, tmp_path):
    metrics, samples = report_inputs()
    w = samples[0].maps
    with throwaway_signals():  # registered signals, shown by their labels with no edit of the page
        per_layer = [AttentionMap(m.kind, None, m.rows, m.cols, PER_LAYER, layer_maps=m.layers * 2) for m in w]
        whole = AttentionMap("cross", None, w[2].rows, w[2].cols, WHOLE, layer_maps=w[2].layers[-1:] * 5)
        sample = dataclasses.replace(defang(samples[0]), signals={PER_LAYER: defang(per_layer), WHOLE: [defang(whole)]})
        path = tmp_path / "report.html"
        attention_report(path, defang(metrics), [sample])
    page = browser.new_page()
    page.goto(path.as_uri())
    viewer = page.locator('[data-sample="0"]')
    signals = viewer.locator("select.signal option")
    assert signals.all_inner_texts() == ["attention weights", "probe, per layer", "probe, whole model"]
    first = viewer.locator("table.heatmap td").first
    shown = lambda x: f"A → Ein: {round(float(x), 4):.3f}"  # noqa: E731
    viewer.locator("select.head").select_option("2")
    viewer.locator("select.signal").select_option(PER_LAYER)  # no heads: the layer as a whole, on the same layer
    assert viewer.get_attribute("data-shown") == f"cross 1 mean {PER_LAYER}"
    assert viewer.locator("select.head option").all_inner_texts() == ["the layer as a whole"]
    assert viewer.locator("select.layer option").all_inner_texts() == ["layer 0", "layer 1"]
    assert first.get_attribute("title") == shown(per_layer[2].layers[1][0][0])
    viewer.locator("select.signal").select_option(WHOLE)  # one map: no layer to choose
    assert viewer.get_attribute("data-shown") == f"cross 0 mean {WHOLE}"
    assert viewer.locator("select.head option").all_inner_texts() == ["the whole model"]
    assert viewer.locator("select.layer").count() == 0
    assert first.get_attribute("title") == shown(whole.layers[0][0][0])
    viewer.locator("select.kind").select_option("encoder")  # a kind the whole-model signal does not cover
    assert viewer.get_attribute("data-shown") == "encoder 0 mean"
    assert viewer.locator("select.signal option").all_inner_texts() == ["attention weights", "probe, per layer"]
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None
