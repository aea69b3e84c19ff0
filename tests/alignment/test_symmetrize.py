"""Symmetrization: hand-computed answers for each method, and the order they must keep."""

import random

import pytest

from qkvmt.alignment.symmetrize import METHODS, symmetrize


def test_grow_diag_adds_neighbours_of_the_intersection_from_the_union():
    forward, reverse = {(0, 0), (1, 1), (2, 1)}, {(0, 0), (1, 1), (2, 2)}
    # (2,1) neighbours (1,1) with source word 2 unaligned; then (2,2), diagonal to (1,1), with
    # target word 2 unaligned.
    assert symmetrize(forward, reverse, "grow-diag") == {(0, 0), (1, 1), (2, 1), (2, 2)}
    assert symmetrize(forward, reverse, "intersection") == {(0, 0), (1, 1)}


def test_grow_diag_follows_a_diagonal_chain_within_one_pass():
    assert symmetrize({(0, 0), (1, 1), (2, 2)}, {(0, 0)}, "grow-diag") == {(0, 0), (1, 1), (2, 2)}


def test_final_adds_unaligned_links_and_final_and_needs_both_words_unaligned():
    forward, reverse = {(0, 0), (1, 3), (3, 3)}, {(0, 0), (2, 2)}
    assert symmetrize(forward, reverse, "grow-diag") == {(0, 0)}  # nothing neighbours (0,0)
    # (1,3) first: both words free. (3,3): target 3 is taken now, source 3 is free.
    assert symmetrize(forward, reverse, "grow-diag-final") == {(0, 0), (1, 3), (3, 3), (2, 2)}
    assert symmetrize(forward, reverse, "grow-diag-final-and") == {(0, 0), (1, 3), (2, 2)}
    assert symmetrize(forward, reverse, "union") == {(0, 0), (1, 3), (3, 3), (2, 2)}


def test_methods_nest_from_intersection_to_union():
    rng = random.Random(0)
    for _ in range(200):
        n, m = rng.randint(1, 8), rng.randint(1, 8)
        f = {(rng.randrange(n), rng.randrange(m)) for _ in range(rng.randint(0, 10))}
        r = {(rng.randrange(n), rng.randrange(m)) for _ in range(rng.randint(0, 10))}
        out = {method: symmetrize(f, r, method) for method in METHODS}
        # final-and is not always inside final: a link that "or" adds first can take a word that
        # a later link needed free, so only each chain is checked.
        assert out["intersection"] <= out["grow-diag"] <= out["grow-diag-final-and"] <= out["union"]
        assert out["grow-diag"] <= out["grow-diag-final"] <= out["union"] == f | r


def test_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="grow-diag-final-and"):
        symmetrize(set(), set(), "gdfa")
