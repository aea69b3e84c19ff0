"""The explorer in headless Chromium, served by uvicorn on a free port: type a sentence, switch
maps, click a token and a head, and read the numbers the page shows against the API's; pick a
target token and see its deletion curves; pick two source tokens, swap their keys or zero a head,
and see Model.intervene's translation with its changed words marked; hostile, empty and too long
input, and a bad edit, show as text or as an error, and the server keeps serving (the layers
panel's: test_lens_panel.py). Served beyond this computer, the page works with the printed
address's token alone.

With QKVMT_SCREENSHOTS=<folder>, it also saves a screenshot of each view there."""

import os
import secrets
from itertools import combinations
from pathlib import Path

import pytest

import qkvmt
from qkvmt.alignment.policy import cross_signals
from qkvmt.analysis.signals import SIGNALS
from qkvmt.explore import lazy_signals
from qkvmt.explore.session import Explorer
from qkvmt.text.metrics import sentence_scores
from tests.analysis.throwaway import PER_LAYER, WHOLE, throwaway_signals
from tests.explore.conftest import REFERENCE, SOURCE, serving

MARK = "document.body.setAttribute('data-pwned','{}')"
HOSTILE = [
    f"<script>{MARK.format(1)}</script> w3",
    f'w4 <img src=x onerror="{MARK.format(2)}">',
    "<script>alert(1)</script>",
]


@pytest.fixture(scope="module")
def url(explorer):
    with serving(explorer) as address:
        yield address


def screenshot(page, name: str) -> None:
    folder = os.environ.get("QKVMT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"explorer_{name}.png"), full_page=True)


def ask(page, source: str, reference: str = "", outcome: str = "shown") -> None:
    page.fill("#source", source)
    page.fill("#reference", reference)
    page.click("#ask button")  # the handler marks the page busy before the click returns
    page.wait_for_selector(f"body[data-state={outcome}]", timeout=60_000)


def shown(text: str) -> float:
    return float(text.rsplit(" ", 1)[-1])


def test_type_a_sentence_click_a_token_and_a_head_and_read_the_apis_numbers(browser, url, model, explorer):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1300, "height": 900})
    asked = []
    page.on("request", lambda r: asked.append(r.url.rsplit("/", 1)[-1]))
    page.goto(url)
    screenshot(page, "empty")
    ask(page, SOURCE, REFERENCE)
    attention = model.attention(SOURCE)
    texts = page.locator("#texts dd").all_inner_texts()
    assert texts[:3] == [SOURCE, REFERENCE, attention.target]
    (own,), _ = sentence_scores([attention.target], [REFERENCE])
    assert texts[3].startswith(f"BLEU {own['bleu']:.1f} · chrF {own['chrf']:.1f}")
    tokens = page.locator("#tokens .tok")
    assert tokens.all_inner_texts() == attention.out_tokens
    for i, score in enumerate(attention.token_scores):
        assert tokens.nth(i).get_attribute("title").startswith(f"p {round(score.prob, 4):.3f} · entropy")
    screenshot(page, "translation")

    # Every kind, layer, head and signal is in the page: switching asks the server nothing but, once, for a
    # signal the first view did not compute (every kind it covers comes at once).
    viewer, first = page.locator("#viewer"), page.locator("#viewer table.heatmap td").first
    for kind, layer, head, signal in (
        ("cross", "1", "2", "weights"),
        ("cross", "1", "2", "value_norms"),
        ("cross", "0", "3", "alti"),
        ("encoder", "1", "0", "value_norms"),
        ("decoder", "0", "mean", "weights"),
    ):
        viewer.locator("select.kind").select_option(kind)
        viewer.locator("select.signal").select_option(signal)
        viewer.locator("select.layer").select_option(layer)
        viewer.locator("select.head").select_option(head)
        m = attention.map(kind, signal)
        expected = m.layers[int(layer)] if head == "mean" else m.weights[int(layer), int(head)]
        assert first.get_attribute("title") == f"{m.rows[0]} → {m.cols[0]}: {round(float(expected[0, 0]), 4):.3f}"
    assert asked == ["", "sentence", "lens", "signal"]  # the layers panel's one request, value_norms' one

    # The policy's word links dot the cross map; another policy asks for its links.
    links = model.align(SOURCE)
    assert page.locator("#pharaoh").inner_text() == f"Pharaoh: {links.pharaoh}"
    viewer.locator("select.kind").select_option("cross")
    dots = {(t, s) for i, j in links.links for t in links.tgt_word_groups[j] for s in links.src_word_groups[i]}
    assert viewer.locator("td.link").count() == len(dots)
    other = model.align(SOURCE, policy={"layer": 1, "head": 0, "signal": "value_norms"})
    page.locator("#policy select.policy-head").select_option("0")
    page.locator("#policy select.policy-layer").select_option("1")
    page.locator("#policy select.policy-signal").select_option("value_norms")
    expect(page.locator("#pharaoh")).to_have_text(f"Pharaoh: {other.pharaoh}")
    screenshot(page, "maps")

    both = explorer.sentence({"source": SOURCE})["symmetrized"]
    assert page.locator("#both-map").get_attribute("data-links") == str(len(both["links"]))

    # Click a target token, then a head: that query's walk through the head.
    row = len(attention.out_tokens) - 1
    tokens.nth(row).click()
    viewer.locator("select.signal").select_option("weights")
    viewer.locator("select.layer").select_option("1")
    viewer.locator("select.head").select_option("2")
    page.wait_for_selector(f'#inspector[data-shown="cross 1 2 {row}"]')
    inspection = model.inspect(SOURCE, kind="cross", layer=1, head=2)
    keys = page.locator("#inspector table.neuron tr[data-key]")
    assert keys.count() == len(inspection.key_tokens)
    dots_qk = inspection.k @ inspection.q[row]
    for j in range(keys.count()):
        qk, scaled, weight, added = map(float, keys.nth(j).locator("td.n").all_inner_texts())
        assert qk == pytest.approx(dots_qk[j], abs=2e-3) and scaled == pytest.approx(
            inspection.scores[row, j], abs=2e-3
        )
        assert weight == pytest.approx(inspection.weights[row, j], abs=2e-3)
        assert added == pytest.approx(inspection.contributions[row, j], abs=2e-3)
    q = page.locator("#inspector table.neuron tr").first.locator("i")
    assert [shown(t) for t in q.evaluate_all("cells => cells.map((c) => c.title)")] == pytest.approx(
        inspection.q[row], abs=2e-3
    )
    out = page.locator("#inspector table.neuron tr.output i").evaluate_all("cells => cells.map((c) => c.title)")
    assert [shown(t) for t in out] == pytest.approx(inspection.output[row], abs=2e-3)
    screenshot(page, "inspector")

    # A click on a row of the encoder's map inspects that source token's query.
    viewer.locator("select.kind").select_option("encoder")
    viewer.locator("table.heatmap th.row").nth(1).click()
    page.wait_for_selector('#inspector[data-shown="encoder 1 2 1"]')
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None


def test_a_target_tokens_deletion_curves_draw_one_line_per_signal_and_a_dashed_random_baseline(browser, url, explorer):
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(url)
    ask(page, SOURCE)
    row = 1
    page.locator("#deletion select.deletion-row").select_option(str(row))
    page.wait_for_selector(f'#curves[data-shown="{row} 1"]', timeout=60_000)  # the last of the two layers
    curves = explorer.curves({"source": SOURCE, "row": row})
    drawn = [r["label"] for r in curves["readings"] if r["layer"] in (None, 1)] + ["random order (mean)"]
    lines = page.locator("#curves svg polyline.reading")
    assert lines.evaluate_all("ls => ls.map((l) => l.dataset.label)") == drawn
    assert page.locator("#curves svg .legend-item text").evaluate_all("ts => ts.map((t) => t.textContent)") == drawn
    assert lines.last.get_attribute("stroke-dasharray") and not lines.first.get_attribute("stroke-dasharray")
    screenshot(page, "curves")
    page.locator("#deletion select.deletion-layer").select_option("0")  # drawn from what the page holds
    page.wait_for_selector(f'#curves[data-shown="{row} 0"]')
    assert lines.evaluate_all("ls => ls.map((l) => l.dataset.label)") == [
        r["label"] for r in curves["readings"] if r["layer"] in (None, 0)
    ] + ["random order (mean)"]


def edit(page, button: str, outcome: str = "shown") -> None:
    page.click(f"#what-if-controls {button}")  # the handler marks the panel busy before the click returns
    page.wait_for_selector(f"#what-if[data-state={outcome}]", timeout=60_000)


@pytest.fixture(scope="module")
def reverse_url(reverse_model):
    """The reverse toy model's explorer: its translation changes when two source tokens trade keys."""
    with serving(Explorer(reverse_model)) as address:
        yield address


def test_pick_two_source_tokens_swap_them_and_see_the_apis_edited_translation(browser, reverse_url, reverse_model):
    model, source = reverse_model, REFERENCE  # the reverse model's source language
    src_tokens = model.attention(source).src_tokens
    swaps = (model.intervene(source, qkvmt.Swap(a, b, "keys")) for a, b in combinations(range(len(src_tokens)), 2))
    # The first pair that puts a new word in (an edit that only drops words marks nothing).
    expected = next((r for r in swaps if any(r.changed)), None)
    assert expected is not None, "no two source tokens bring a new word when they swap keys"
    a, b = expected.edits[0].a, expected.edits[0].b
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(reverse_url)
    ask(page, source)
    tokens, picked = page.locator("#what-if-tokens .tok"), page.locator("#what-if-picked")
    assert tokens.all_inner_texts() == src_tokens  # x_1 .. x_n </s>: the keys a swap names

    # Nothing picked: the server's one-line error shows in the panel, and the page goes on.
    edit(page, "button[data-edit=swap][data-what=keys]", "error")
    assert page.locator("#what-if-error").inner_text().startswith("error: swap needs two source tokens, a and b")
    assert page.locator("#what-if-result").is_hidden()

    tokens.nth(a).click()
    tokens.nth(b).click()
    assert picked.inner_text() == f"picked: {a} {src_tokens[a]}, {b} {src_tokens[b]}"
    assert page.locator("#what-if-tokens .tok.picked").count() == 2
    edit(page, "button[data-edit=swap][data-what=keys]")
    assert page.locator("#what-if-error").is_hidden()
    assert page.locator("#what-if-original").inner_text() == expected.original
    assert page.locator("#what-if-edited").inner_text() == " ".join(expected.edited.split())
    marks = [w for w, c in zip(expected.edited.split(), expected.changed) if c]
    assert page.locator("#what-if-edited mark").all_inner_texts() == marks
    change = page.locator("#what-if-change").inner_text()
    assert float(change.rsplit("(", 1)[1].rstrip(")")) == pytest.approx(expected.log_prob_change.sum(), abs=2e-3)
    screenshot(page, "what_if")

    # Keys and values swapped together: the same lookup, reordered, so the same translation.
    edit(page, "button[data-edit=swap][data-what=both]")
    assert page.locator("#what-if-edited").inner_text() == expected.original
    assert page.locator("#what-if-edited mark").count() == 0

    # A position past the sentence, sent as the page sends: a JSON error; then the panel still works.
    status, error = page.evaluate(
        """async (body) => { const r = await fetch("api/intervene", {method: "POST",
        headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
        return [r.status, (await r.json()).error]; }""",
        {"source": source, "edit": "swap", "what": "keys", "kind": "cross", "a": 0, "b": len(src_tokens)},
    )
    assert status == 400 and error.startswith(f"Swap.b={len(src_tokens)} does not exist: the source tokens are")
    page.click("#what-if-clear")
    assert picked.inner_text().startswith("picked: none") and page.locator("#what-if-tokens .tok.picked").count() == 0
    edit(page, "button[data-edit=swap][data-what=values]", "error")
    assert "swap needs two source tokens" in page.locator("#what-if-error").inner_text()

    # The head chosen in the viewer, in the layer shown only: zeroed.
    viewer = page.locator("#viewer")
    viewer.locator("select.layer").select_option("1")
    viewer.locator("select.head").select_option("2")
    page.check("#what-if-layer")
    assert page.locator("#what-if-scope").inner_text() == "acts on cross attention, layer 1"
    edit(page, "button[data-edit=zero]")
    zeroed = model.intervene(source, qkvmt.Zero("output", kind="cross", layers=(1,), heads=(2,)))
    assert page.locator("#what-if-error").is_hidden()
    assert page.locator("#what-if-edited").inner_text() == " ".join(zeroed.edited.split())
    assert page.locator("#what-if-edited mark").all_inner_texts() == [
        w for w, c in zip(zeroed.edited.split(), zeroed.changed) if c
    ]
    viewer.locator("select.kind").select_option("decoder")  # no source keys there: swapping is not offered
    assert page.locator("#what-if-controls button[data-edit=swap]").evaluate_all("bs => bs.every((b) => b.disabled)")
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None


def test_hostile_empty_and_too_long_input_shows_as_text_or_an_error(browser, url, model):
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    for text in HOSTILE:
        ask(page, text, text)
        assert page.locator("#texts dd").all_inner_texts()[:2] == [text, text]
    screenshot(page, "hostile")
    ask(page, "   ", outcome="error")
    assert page.locator("#error").inner_text().startswith("error: source is empty")
    n = model.transformer.cfg.max_positions
    ask(page, " ".join(["w1"] * n), outcome="error")
    assert f"the source has {n} subwords, but the model reads at most {n - 1}" in page.locator("#error").inner_text()
    screenshot(page, "error")
    ask(page, SOURCE)  # the server kept serving
    assert page.locator("#error").is_hidden() and page.locator("#texts dd").first.inner_text() == SOURCE
    assert dialogs == [] and page.evaluate("document.body.getAttribute('data-pwned')") is None


def test_served_beyond_this_computer_the_page_works_with_the_printed_token_alone(browser, explorer):
    token = secrets.token_urlsafe(32)
    with serving(explorer, token) as url:
        page = browser.new_page()  # a context of its own: no cookie yet
        refused = page.goto(url)
        assert refused.status == 403 and "needs its token" in refused.json()["error"]
        page.goto(f"{url}?token={token}")
        assert page.url == url  # traded for a cookie: the token left the address bar
        ask(page, SOURCE)  # the page's own fetches are answered
        assert page.locator("#texts dd").first.inner_text() == SOURCE
        page.reload()
        assert page.locator("#source").count() == 1
        stranger = browser.new_page()
        assert stranger.goto(url).status == 403
        answer = stranger.evaluate(
            """async (url) => { const r = await fetch(url + "api/sentence", {method: "POST",
            headers: {"Content-Type": "application/json"}, body: JSON.stringify({source: "w3"})});
            return r.status; }""",
            url,
        )
        assert answer == 403


def test_the_selectors_list_every_registered_signal(browser, model):
    from playwright.sync_api import expect

    with throwaway_signals(), serving(Explorer(model)) as address:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(address)
        ask(page, SOURCE)
        viewer = page.locator("#viewer")
        # every registered signal, in the registry's order; those the first view did not compute, marked
        labels = [
            s.label + ("" if name in lazy_signals.FIRST else " (computed when chosen)") for name, s in SIGNALS.items()
        ]
        assert viewer.locator("select.signal option").all_inner_texts() == labels
        assert page.locator("#policy select.policy-signal option").all_inner_texts() == [
            f"signal {s}" for s in cross_signals()
        ]
        viewer.locator("select.signal").select_option(WHOLE)  # computed now, on request
        expect(viewer).to_have_attribute("data-shown", f"cross 0 mean {WHOLE}")
        attention = model.attention(SOURCE, signals={WHOLE})
        first = page.locator("#viewer table.heatmap td").first
        m = attention.map("cross", WHOLE)
        assert first.get_attribute("title") == f"{m.rows[0]} → {m.cols[0]}: {round(float(m.layers[0, 0, 0]), 4):.3f}"
        page.locator("#policy select.policy-signal").select_option(PER_LAYER)
        expect(page.locator("#pharaoh")).to_have_text(
            f"Pharaoh: {model.align(SOURCE, policy={'signal': PER_LAYER}).pharaoh}"
        )
        viewer.locator("select.kind").select_option("encoder")
        encoder = viewer.locator("select.signal option").all_inner_texts()
        assert f"{SIGNALS[PER_LAYER].label} (computed when chosen)" in encoder
        assert not any(option.startswith(SIGNALS[WHOLE].label) for option in encoder)  # it has no encoder maps
        assert page.evaluate("document.body.getAttribute('data-pwned')") is None
