"""Attention sinks: which key columns a name leaves out, and maps renormalized without them."""

import numpy as np
import pytest

from qkvmt.text.sinks import described, is_punctuation, renormalized_without, sink_columns


def test_a_class_and_literal_tokens_name_the_columns():
    tokens = ["▁Ein", "▁Mann", ",", "▁der", "▁...", "__de__", "▁Hut.", "</s>"]
    assert sink_columns(tokens, ("</s>", "punctuation")).tolist() == [0, 0, 1, 0, 1, 0, 0, 1]
    assert sink_columns(tokens, "__de__").tolist() == [0, 0, 0, 0, 0, 1, 0, 0]  # a language tag, by its token
    assert [is_punctuation(t) for t in ("▁", "«", "▁—", "Hut.", "’s")] == [False, True, True, False, False]


def test_what_is_left_out_is_said_in_words():
    assert described(("</s>", "punctuation")) == "without </s> and punctuation (renormalized)"
    assert described("__de__") == "without __de__ (renormalized)"
    assert described(("</s>", "__de__", "punctuation")) == "without </s>, __de__ and punctuation (renormalized)"


def test_a_bare_word_start_mark_goes_with_the_punctuation_it_starts():
    # " Haus ." is split "▁Haus" "▁" "."; a bare mark before a word is a piece of that word.
    tokens = ["▁Haus", "▁", ".", "▁", "X", "▁", "!", "?", "</s>"]
    assert sink_columns(tokens, "punctuation").tolist() == [0, 1, 1, 0, 0, 1, 1, 1, 0]
    assert sink_columns(tokens, "</s>").tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1]


@pytest.mark.parametrize("drop", [(), ("",), (None,), [3]])
def test_nothing_to_drop_is_refused_saying_how_to_name_it(drop):
    with pytest.raises(ValueError, match=r"drop=\('</s>', 'punctuation'\)"):
        sink_columns(["▁a", "</s>"], drop)


def test_each_row_keeps_its_total_spread_in_proportion_over_the_other_columns():
    rng = np.random.default_rng(0)
    maps = rng.dirichlet(np.ones(6), size=(2, 3, 4)) * rng.uniform(0.2, 1.0, size=(2, 3, 4, 1))  # rows of any total
    columns = np.array([0, 1, 0, 0, 1, 0], dtype=bool)
    out = renormalized_without(maps, columns)
    kept = maps[..., [0, 2, 3, 5]]
    np.testing.assert_allclose(out.sum(-1), maps.sum(-1))
    np.testing.assert_allclose(out, kept / kept.sum(-1, keepdims=True) * maps.sum(-1, keepdims=True))


def test_a_row_whose_mass_was_all_on_the_sinks_is_zero_and_signed_maps_are_refused():
    maps = np.array([[0.0, 1.0], [0.5, 0.5]])
    np.testing.assert_array_equal(renormalized_without(maps, np.array([False, True])), [[0.0], [1.0]])
    with pytest.raises(ValueError, match="no negative values"):
        renormalized_without(np.array([[-0.2, 0.7, 0.5]]), np.array([False, False, True]))
