"""The explorer's layers panel. On the server: a lens asked as JSON is Model.lens's answer for
the same sentence (with the explorer's decoding), field by field; the last encoder depth is the
model's translation and marks nothing; answers are kept per sentence, a bounded number; every bad
field is a one-line UserError (a JSON 400 over HTTP, after which the server keeps serving). In
headless Chromium, as test_browser.py drives it, on the bundled model: slide through the encoder
depths and read Model.lens's translations, read each decoder layer's top tokens, and see a bad
request's error in the panel, after which the page goes on."""

import json
import re

import numpy as np
import pytest

import qkvmt
from qkvmt.analysis.intervention import changed_words
from qkvmt.errors import UserError
from qkvmt.explore import lens_panel
from qkvmt.explore.session import Explorer
from tests.explore.conftest import SOURCE, serving
from tests.explore.test_app import client_of
from tests.explore.test_browser import HOSTILE, ask, screenshot

ATOL = 5e-5  # the JSON holds 4 decimals


def asked(explorer, **fields) -> dict:
    return json.loads(json.dumps(explorer.lens({"source": SOURCE} | fields)))  # as sent


def same(shown: dict, expected) -> None:
    """The explorer's answer is `expected` (a Model.lens result), field by field."""
    assert shown["source"] == expected.source and shown["tokens"] == expected.tokens
    assert shown["translation"] == expected.depths[-1]
    assert [d["layers"] for d in shown["encoder_depths"]] == list(range(1, len(expected.depths) + 1))
    assert [d["translation"] for d in shown["encoder_depths"]] == expected.depths
    for d in shown["encoder_depths"]:
        assert d["words"] == d["translation"].split()
        assert d["changed"] == changed_words(expected.depths[-1], d["translation"])
    assert [d["layer"] for d in shown["decoder_layers"]] == list(range(len(expected.top_tokens)))
    for layer, d in enumerate(shown["decoder_layers"]):
        assert [[t["token"] for t in top] for top in d["top"]] == expected.top_tokens[layer]
        np.testing.assert_allclose([[t["p"] for t in top] for top in d["top"]], expected.top_probs[layer], atol=ATOL)
        assert d["rank_of_own_token"] == expected.final_rank[layer].tolist()


def test_a_lens_is_answered_as_model_lens_answers_it(explorer, model):
    shown = asked(explorer)
    expected = model.lens(SOURCE)
    same(shown, expected)
    assert len(shown["encoder_depths"]) == model.transformer.cfg.encoder_layers
    assert len(shown["decoder_layers"]) == model.transformer.cfg.decoder_layers
    assert all(len(top) == lens_panel.TOP_K for d in shown["decoder_layers"] for top in d["top"])
    # the last depth reads every encoder layer: the model's own translation, the one the page shows
    assert shown["translation"] == model.translate(SOURCE)[0] == explorer.sentence({"source": SOURCE})["translation"]
    assert not any(shown["encoder_depths"][-1]["changed"])


@pytest.mark.parametrize("top_k", [1, lens_panel.MOST])
def test_top_k_is_model_lens_top_k(explorer, model, top_k):
    same(asked(explorer, top_k=top_k), model.lens(SOURCE, top_k=top_k))


def test_the_explorers_decoding_settings_decode_every_depth(model):
    explorer = Explorer(model, decode={"beam_size": 1, "max_len_b": 3})
    shown = asked(explorer)
    same(shown, model.lens(SOURCE, beam_size=1, max_len_b=3))
    assert shown["translation"] == model.translate(SOURCE, beam_size=1, max_len_b=3)[0]


def test_a_lens_asked_again_is_not_computed_again_and_answers_per_sentence_are_bounded(model, monkeypatch):
    explorer = Explorer(model)
    first = asked(explorer, top_k=1)
    computed = []
    lens = model.lens
    monkeypatch.setattr(model, "lens", lambda *a, **k: computed.append(k["top_k"]) or lens(*a, **k))
    assert asked(explorer, top_k=1) == first and computed == []
    for k in range(2, lens_panel.KEPT + 2):  # one more than are kept: the oldest, top_k=1, is dropped
        asked(explorer, top_k=k)
    assert len(explorer._sentence(SOURCE).lenses) == lens_panel.KEPT
    assert asked(explorer, top_k=1) == first and computed[-1] == 1


def test_the_page_has_the_panel_and_asks_the_lens_endpoint(explorer):
    html = explorer.page()
    data = json.loads(re.search(r'id="data">(.*?)</script>', html, re.S).group(1))
    assert data["api"]["lens"] == "api/lens"
    assert 'id="lens"' in html and re.search(r'<input type="range" id="lens-depth"', html)


OK = {"source": SOURCE}


@pytest.mark.parametrize(
    "body,message",
    [
        ([SOURCE], "must be a JSON object"),
        ("w3", "must be a JSON object"),
        ({"top_k": 3}, "no source given"),
        ({"source": "   "}, "source is empty"),
        ({"source": 3}, "source: give text, not int"),
        ({"source": [SOURCE]}, "source: give text, not list"),
        (OK | {"top_k": 0}, r"top_k=0: give a whole number from 1 to 10, or leave it out for 3"),
        (OK | {"top_k": 11}, r"top_k=11: give a whole number from 1 to 10"),
        (OK | {"top_k": -1}, r"top_k=-1: give a whole number"),
        (OK | {"top_k": True}, r"top_k=True: give a whole number"),
        (OK | {"top_k": "3"}, r"top_k='3': give a whole number"),
        (OK | {"top_k": 2.0}, r"top_k=2.0: give a whole number"),
        (OK | {"top_k": None}, r"top_k=None: give a whole number"),
        (OK | {"top_k": 10**100}, r"top_k=10+: give a whole number"),
        (OK | {"depth": 1}, "unknown field 'depth': a lens request has source, top_k"),
        ({"source": " ".join(["w1"] * 300)}, "nothing is cut"),
    ],
)
def test_bad_fields_are_one_line_user_errors(explorer, body, message):
    with pytest.raises(UserError, match=message) as e:
        explorer.lens(body)
    assert "\n" not in str(e.value)


def test_over_http_a_bad_request_is_a_json_error_and_a_good_one_is_then_answered(explorer, model):
    client = client_of(explorer)
    r = client.post("/api/lens", json=OK | {"top_k": 42})
    assert r.status_code == 400 and r.json() == {
        "error": "top_k=42: give a whole number from 1 to 10, or leave it out for 3"
    }
    r = client.post("/api/lens", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = client.post("/api/lens", json=OK, headers={"origin": "http://evil.example"})
    assert r.status_code == 403 and "requests from other sites" in r.json()["error"]
    ok = client.post("/api/lens", json=OK)
    assert ok.status_code == 200
    same(ok.json(), model.lens(SOURCE))


# Sentences for the bundled model, whose first encoder layer alone translates differently from
# all three (the toy models' first layer gives no translation at all): the first such one is used.
CANDIDATES = ("Ein Hund rennt über eine grüne Wiese .", "Zwei Männer spielen Fußball auf einer Wiese .")


@pytest.fixture(scope="module")
def bundled():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.fixture(scope="module")
def url(bundled):
    with serving(Explorer(bundled)) as address:
        yield address


def lens_shown(page, outcome: str = "shown") -> None:
    page.wait_for_selector(f"#lens[data-state={outcome}]", timeout=60_000)


def test_slide_through_the_encoder_depths_and_read_the_apis_lens(browser, url, bundled):
    lenses = (bundled.lens(s) for s in CANDIDATES)
    expected = next((r for r in lenses if r.depths[0] and r.depths[0] != r.depths[-1]), None)
    assert expected is not None, "the first encoder layer alone translates every candidate as the model does"
    source, n, own = expected.source, len(expected.depths), expected.depths[-1]
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(url)
    ask(page, source)
    lens_shown(page)
    slider, translation = page.locator("#lens-depth"), page.locator("#lens-translation")
    assert slider.get_attribute("type") == "range" and slider.is_enabled()
    assert (slider.get_attribute("min"), slider.get_attribute("max"), slider.input_value()) == ("1", str(n), str(n))
    assert translation.inner_text() == own == page.locator("#texts dd").last.inner_text()  # the model's, first
    assert page.locator("#lens-model").inner_text() == own

    # Depth 1: the decoder reads the first encoder layer's output; the words the model lacks are marked.
    slider.fill("1")
    page.wait_for_selector('#lens[data-depth="1"]')
    assert translation.inner_text() == " ".join(expected.depths[0].split())
    assert page.locator("#lens-depth-label").inner_text().startswith(f"encoder layers 1..1 of {n}")
    changed = changed_words(own, expected.depths[0])
    marked = [w for w, c in zip(expected.depths[0].split(), changed) if c]
    assert marked and translation.locator("mark").all_inner_texts() == marked
    screenshot(page, "lens")
    slider.focus()
    page.keyboard.press("End")  # the last depth, as a keyboard moves a slider: the model's own translation
    page.wait_for_selector(f'#lens[data-depth="{n}"]')
    assert translation.inner_text() == own == bundled.translate(source)[0]
    assert translation.locator("mark").count() == 0

    # The logit lens: a row per decoder layer, a column per token of the model's translation.
    table = page.locator("#lens-table table.lens")
    assert table.locator("tr").first.locator("th").all_inner_texts() == ["decoder layer", *expected.tokens]
    rows = table.locator("tr[data-layer]")
    assert rows.count() == bundled.transformer.cfg.decoder_layers == len(expected.top_tokens)
    for layer in range(rows.count()):
        cells = rows.nth(layer).locator("td")
        assert cells.locator(".top").all_inner_texts() == [top[0] for top in expected.top_tokens[layer]]
        probs = [float(p) for p in cells.locator(".p").all_inner_texts()]
        assert probs == pytest.approx(expected.top_probs[layer][:, 0], abs=6e-3)
        shaded = cells.evaluate_all("cs => cs.map((c) => c.classList.contains('own'))")
        assert shaded == [rank == 0 for rank in expected.final_rank[layer].tolist()]

    # A bad request, as a broken or hostile client sends it: the server's one-line error shows in
    # the panel, and the page goes on.
    def tampered(route):
        route.continue_(post_data=json.dumps(json.loads(route.request.post_data) | {"top_k": 99}))

    page.route("**/api/lens", tampered)
    ask(page, source)
    lens_shown(page, "error")
    error = page.locator("#lens-error").inner_text()
    assert error == "error: top_k=99: give a whole number from 1 to 10, or leave it out for 3"
    assert slider.is_disabled() and page.locator("#lens-table tr").count() == 0
    page.unroute("**/api/lens")
    ask(page, HOSTILE[0])
    lens_shown(page)
    assert page.locator("#lens-error").is_hidden()
    assert page.locator("#lens-model").inner_text() == bundled.lens(HOSTILE[0]).depths[-1]
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None
