"""The explorer's other readings of attention in headless Chromium, on the bundled de->en model: type
a sentence and a reference, leave the sinks out of the cross map, switch to the reference's
teacher-forced pass, and read the drawn map's columns, rows, labels and values against the API's;
a map of signed numbers, or another kind's, cannot leave them out and the page says why; a
reference of hostile text shows as text, a too long one as an error, and the server keeps serving."""

import pytest

from qkvmt.explore.session import Explorer
from qkvmt.text.sinks import SINKS
from tests.analysis.throwaway import SIGNED, signed_signal
from tests.explore.conftest import serving
from tests.explore.test_browser import HOSTILE, ask
from tests.explore.test_readings import REFERENCE, SOURCE

OWN, FORCED = "model's translation", "reference (teacher-forced)"
WITHOUT = "without </s> and punctuation (renormalized)"


@pytest.fixture(scope="module")
def url(bundled):
    with signed_signal(), serving(Explorer(bundled)) as address:  # a signed signal, listed in the page
        yield address


def check_drawn(viewer, matrix, rows, cols) -> None:
    """The heatmap drawn in `viewer` is `matrix` with these row and column labels, every cell titled
    with its value as the page prints it (4 decimals sent, 3 shown)."""
    assert viewer.locator("table.heatmap th.row").all_inner_texts() == rows
    assert viewer.locator("table.heatmap th.col").all_inner_texts() == cols
    titles = viewer.locator("table.heatmap td").evaluate_all("cells => cells.map((c) => c.title)")
    assert titles == [f"{r} → {c}: {round(float(v), 4):.3f}" for r, row in zip(rows, matrix) for c, v in zip(cols, row)]


def test_leave_the_sinks_out_and_switch_to_the_references_teacher_forced_maps(browser, url, bundled):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1300, "height": 900})
    asked = []
    page.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]))
    page.goto(url)
    ask(page, SOURCE, REFERENCE)
    own, forced = bundled.attention(SOURCE), bundled.attention(SOURCE, REFERENCE)
    viewer = page.locator("#viewer")
    caption, sinks = viewer.locator("p.caption"), viewer.locator("input.sinks")
    assert viewer.locator("select.reading option").all_inner_texts() == [OWN, FORCED]
    assert viewer.locator("label.sinks").inner_text().strip() == WITHOUT and not sinks.is_checked()
    viewer.locator("select.layer").select_option("2")
    viewer.locator("select.head").select_option("1")
    assert caption.inner_text() == f"{OWN}: attention weights"
    whole = own.map("cross")
    check_drawn(viewer, whole.weights[2, 1], whole.rows, whole.cols)
    links = bundled.align(SOURCE)
    dots = {(t, s) for i, j in links.links for t in links.tgt_word_groups[j] for s in links.src_word_groups[i]}
    assert viewer.locator("td.link").count() == len(dots)

    # Without its sinks: the API's map without </s> and punctuation, renormalized, the links' dots moved along.
    sinks.check()
    cut = own.map("cross", drop=SINKS)
    expect(viewer).to_have_attribute("data-without", "true")
    assert caption.inner_text() == f"{OWN}: attention weights {WITHOUT}" and len(cut.cols) < len(whole.cols)
    check_drawn(viewer, cut.weights[2, 1], cut.rows, cut.cols)
    kept = [c for c in range(len(whole.cols)) if whole.cols[c] in cut.cols]
    assert viewer.locator("td.link").count() == len([d for d in dots if d[1] in kept])
    viewer.locator("select.head").select_option("mean")
    check_drawn(viewer, cut.layers[2], cut.rows, cut.cols)

    # The reference forced on the decoder: its rows, its maps, still without the sinks; no links of it.
    viewer.locator("select.reading").select_option("1")
    expect(viewer).to_have_attribute("data-reading", "1")
    ref = forced.map("cross", drop=SINKS)
    assert caption.inner_text() == f"{FORCED}: attention weights {WITHOUT}" and ref.rows != cut.rows
    check_drawn(viewer, ref.layers[2], ref.rows, ref.cols)
    assert viewer.locator("td.link").count() == 0
    viewer.locator("select.signal").select_option("value_norms")  # computed now, for the reference's pass
    expect(viewer).to_have_attribute("data-shown", "cross 2 mean value_norms")
    norms = bundled.attention(SOURCE, REFERENCE, signals={"value_norms"}).map("cross", "value_norms", drop=SINKS)
    assert caption.inner_text() == f"{FORCED}: {norms.signal_label}"
    check_drawn(viewer, norms.layers[2], norms.rows, norms.cols)
    viewer.locator("select.reading").select_option("0")  # the same signal, computed for the translation's pass
    expect(viewer).to_have_attribute("data-reading", "0")
    expect(viewer).to_have_attribute("data-shown", "cross 2 mean value_norms")
    norms = bundled.attention(SOURCE, signals={"value_norms"}).map("cross", "value_norms", drop=SINKS)
    check_drawn(viewer, norms.layers[2], norms.rows, norms.cols)
    assert asked == ["", "sentence", "lens", "signal", "signal"]

    # A signed map cannot be renormalized, and another kind's keeps its columns: the box says why.
    viewer.locator("select.signal").select_option(SIGNED)
    expect(viewer).to_have_attribute("data-shown", f"cross 2 mean {SIGNED}")
    assert sinks.is_disabled() and sinks.is_checked() and viewer.get_attribute("data-without") == "false"
    assert "only maps of shares (no negative values)" in viewer.locator("label.sinks .why").inner_text()
    signed = bundled.attention(SOURCE, signals={SIGNED}).map("cross", SIGNED)
    check_drawn(viewer, signed.layers[2], signed.rows, signed.cols)
    viewer.locator("select.kind").select_option("encoder")
    assert sinks.is_disabled() and viewer.locator("label.sinks .why").inner_text() == " (cross attention only)"
    viewer.locator("select.kind").select_option("cross")
    viewer.locator("select.signal").select_option("weights")
    assert sinks.is_enabled()
    sinks.uncheck()
    check_drawn(viewer, whole.layers[-1], whole.rows, whole.cols)


def test_a_hostile_reference_shows_as_text_and_a_too_long_one_as_an_error(browser, url, bundled):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    viewer = page.locator("#viewer")
    for text in HOSTILE:
        ask(page, SOURCE, text)
        assert page.locator("#texts dd").all_inner_texts()[1] == text
        viewer.locator("select.reading").select_option("1")
        rows = bundled.attention(SOURCE, text).out_tokens
        assert viewer.locator("table.heatmap th.row").all_inner_texts() == rows
    n = bundled.transformer.cfg.max_positions
    ask(page, SOURCE, " ".join(["man"] * n), outcome="error")
    assert f"the reference has {n} subwords, but the model reads at most {n - 1}" in page.locator("#error").inner_text()
    ask(page, SOURCE, "man " * 20_000, outcome="error")  # past what the server reads of a request
    assert page.locator("#error").inner_text().startswith("error: the request is")
    ask(page, SOURCE)  # the server kept serving; without a reference, one reading
    assert page.locator("#error").is_hidden() and viewer.locator("select.reading").count() == 0
    assert dialogs == [] and page.evaluate("document.body.getAttribute('data-pwned')") is None
