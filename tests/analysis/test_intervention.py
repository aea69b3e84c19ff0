"""Model.intervene on a bundled model: the edited translation is the search's under the edit (the
cached search agrees with the uncached one, its oracle), the log-probability change is that of a
forced pass, swapping a key-value pair changes nothing, every input is checked before any
decoding (a query position, a token of the translation, once it is known), and the result saves
itself."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

import qkvmt
from qkvmt.analysis import intervention
from qkvmt.analysis.edits import compiled
from qkvmt.analysis.intervention import changed_words, shape_of
from qkvmt.analysis.trace import edited
from qkvmt.decoding.lines import translate_ids
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs
from qkvmt.text.tokenizer import encode

SENTENCE = "Ein Hund rennt über eine grüne Wiese ."
DONOR = "Eine Katze rennt über eine grüne Wiese ."


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


def test_swapping_both_changes_nothing_and_keys_only_equal_values_only(model):
    both = model.intervene(SENTENCE, qkvmt.Swap(1, 6, "both"))
    assert both.edited == both.original and not any(both.changed)
    assert np.abs(both.log_prob_change).max() < 1e-4
    keys, values = (model.intervene(SENTENCE, qkvmt.Swap(1, 6, what)) for what in ("keys", "values"))
    assert keys.edited == values.edited != keys.original
    np.testing.assert_allclose(keys.log_prob_edited, values.log_prob_edited, atol=1e-4)
    assert not np.allclose(keys.cross_after, values.cross_after, atol=1e-3)  # the map tells them apart


@pytest.mark.parametrize(
    "edit",
    [
        qkvmt.Swap(1, 6, "keys", layers=(1,)),
        qkvmt.Zero("output", kind="decoder", layers=(1,), heads=(0, 2)),
        qkvmt.Zero("values", kind="encoder", heads=(0, 1)),
        qkvmt.Patch(DONOR, "values"),
        qkvmt.Knockout(1, 1),
    ],
    ids=lambda e: type(e).__name__,
)
def test_the_edited_translation_is_an_uncached_search_under_the_edit(model, edit):
    result = model.intervene(SENTENCE, edit)
    m, cfg = model.transformer, model.decoding()
    src_ids = encode(model.tokenizer, [SENTENCE])[0]
    src = build_inputs([src_ids], None, m.cfg.specials, m.cfg.max_positions).src
    sites = compiled([edit], shape_of(m, src.size(1), 64), {id(edit): edit.prepare(m, model.tokenizer, src_ids)})
    with edited(m, sites), torch.no_grad():
        ids = translate_ids(m, model.tokenizer, [SENTENCE], replace(cfg, use_cache=False))[0]
    assert result.edited == model.tokenizer.decode(ids)
    assert result.original == model.translate([SENTENCE])[0]
    assert np.abs(result.log_prob_change).max() > 1e-2  # the edit took effect
    assert result.changed == changed_words(result.original, result.edited)
    # the log-probabilities are a forced pass's over the original translation, with and without
    forced = model.attention(SENTENCE, signals=["weights"])
    np.testing.assert_allclose(result.cross_before, forced.cross, atol=1e-5)
    assert len(result.log_prob) == len(result.original_tokens)


def test_a_patched_value_carries_the_donors_word_and_a_patched_key_does_not(model):
    donor = model.translate([DONOR])[0]
    by_value = model.intervene(SENTENCE, qkvmt.Patch(DONOR, "values"))
    by_key = model.intervene(SENTENCE, qkvmt.Patch(DONOR, "keys"))
    cat = next(w for w in donor.split() if w not in by_value.original.split())  # the donor's own word
    assert cat in by_value.edited.split() and cat not in by_key.edited.split()


@pytest.mark.parametrize(
    "edits, message",
    [
        ((qkvmt.Swap(1, 40),), r"^Swap.b=40 does not exist: the source tokens are 0..9 "),
        ((qkvmt.Knockout(1, 90),), r"^Knockout.key=90 does not exist: the source tokens are 0\.\.9 "),
        ((qkvmt.Patch(DONOR, positions=()),), r"^Patch names no position: leave positions unset"),
        ((qkvmt.Patch("Ein kleines Kätzchen"),), r"^the donor 'Ein kleines Kätzchen' splits into \d+ tokens"),
        ((qkvmt.Patch(""),), r"^Patch needs a donor"),
        ((), r"^intervene needs at least one edit"),
        (("swap",), r"^'swap' is not an edit"),
    ],
)
def test_bad_edits_are_one_line_errors_before_any_decoding(model, monkeypatch, edits, message):
    def no_search(*args, **kwargs):
        raise AssertionError("decoded before the edits were checked")

    monkeypatch.setattr(intervention, "translate_ids", no_search)
    with pytest.raises(UserError, match=message) as error:
        model.intervene(SENTENCE, *edits)
    assert "\n" not in str(error.value)


def test_the_result_saves_its_json_and_a_page_marking_the_changed_words(model, tmp_path):
    result = model.intervene(SENTENCE, qkvmt.Swap(1, 6, "keys"))
    folder = result.save(tmp_path / "out")
    saved = json.loads((folder / "intervention.json").read_text())
    assert saved["edits"] == [
        {"edit": "Swap", "kind": "cross", "layers": None, "heads": None, "a": 1, "b": 6, "what": "keys"}
    ]
    assert saved["original"] == result.original and saved["edited"] == result.edited
    assert saved["changed_words"] == [w for w, c in zip(result.edited.split(), result.changed) if c]
    page = (folder / "intervention.html").read_text()
    assert re.findall(r"<mark>(.*?)</mark>", page) == saved["changed_words"]
    assert "<iframe" in result._repr_html_()


def test_a_knockout_query_is_a_token_of_the_translation_negatives_counting_from_its_end(model):
    n = len(model.intervene(SENTENCE, qkvmt.Knockout(1, 1)).original_tokens)  # y_1 .. y_m </s>
    with pytest.raises(UserError, match=rf"^Knockout\.query={n} does not exist: the output tokens are 0\.\.{n - 1} "):
        model.intervene(SENTENCE, qkvmt.Knockout(n, 1))  # within the search's reach, past the translation
    from_end, counted = (model.intervene(SENTENCE, qkvmt.Knockout(q, 1, layers=(0,))) for q in (-2, n - 2))
    np.testing.assert_array_equal(from_end.log_prob_edited, counted.log_prob_edited)
    change = np.abs(from_end.log_prob_change)
    assert change[n - 2] > 1e-4 and change[: n - 2].max() < 1e-5  # that row, not the rows before it
