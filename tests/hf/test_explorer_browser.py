"""The explorer on an imported Marian model, in headless Chromium: type a sentence and read the imported
model's translation and token scores; choose a signal the first view left out and see it computed and drawn
as the API computes it; pick two source tokens, swap their values and read Model.intervene's translation."""

import pytest

import qkvmt
from qkvmt.explore.session import Explorer
from tests.explore.conftest import serving
from tests.explore.test_browser import ask, edit
from tests.hf.test_tokenizers import whole_marian_folder

pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

SOURCE = "Ein Mann läuft über die Straße ."


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    folder = whole_marian_folder(tmp_path_factory.mktemp("hf") / "opus-mt-de-en")[0]
    return qkvmt.load(folder, device="cpu")


def test_an_imported_model_in_the_explorer(browser, imported):
    from playwright.sync_api import expect

    attention = imported.attention(SOURCE, signals={"value_norms"})
    with serving(Explorer(imported)) as url:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(url)
        ask(page, SOURCE)
        assert page.locator("#texts dd").all_inner_texts()[-1] == attention.target == imported.translate(SOURCE)[0]
        tokens = page.locator("#tokens .tok")
        assert tokens.all_inner_texts() == attention.out_tokens  # the folder's own SentencePiece pieces
        for i, score in enumerate(attention.token_scores):
            assert tokens.nth(i).get_attribute("title").startswith(f"p {round(score.prob, 4):.3f} · entropy")

        viewer = page.locator("#viewer")
        viewer.locator("select.kind").select_option("cross")
        viewer.locator("select.signal").select_option("value_norms")  # computed now, on request
        viewer.locator("select.layer").select_option("1")
        viewer.locator("select.head").select_option("2")
        expect(viewer).to_have_attribute("data-shown", "cross 1 2 value_norms")
        m = attention.map("cross", "value_norms")
        first = page.locator("#viewer table.heatmap td").first
        value = round(float(m.weights[1, 2, 0, 0]), 4)
        assert first.get_attribute("title") == f"{m.rows[0]} → {m.cols[0]}: {value:.3f}"

        expected = imported.intervene(SOURCE, qkvmt.Swap(1, 3, "values"))
        src = page.locator("#what-if-tokens .tok")
        assert src.all_inner_texts() == attention.src_tokens
        src.nth(1).click()
        src.nth(3).click()
        edit(page, "button[data-edit=swap][data-what=values]")
        assert page.locator("#what-if-original").inner_text() == expected.original
        assert page.locator("#what-if-edited").inner_text() == " ".join(expected.edited.split())
