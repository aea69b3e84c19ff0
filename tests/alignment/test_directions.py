"""Two models, one per direction, read one sentence pair: each direction's argmax links, the hard
symmetrizations of those, and the soft ones read from the two models' weights themselves."""

import numpy as np
import pytest

from qkvmt.alignment.directions import TWO_MODEL_METHODS, TwoWay, checked_method
from qkvmt.alignment.symmetrize import symmetrize
from qkvmt.errors import UserError

# 3 source words, 2 target words. The forward model's rows are target words over source words;
# the reverse model's rows are source words (its targets) over target words.
FORWARD = np.array([[0.6, 0.4, 0.0], [0.1, 0.1, 0.8]])
REVERSE = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])


def test_each_direction_links_by_its_own_argmax_and_the_hard_methods_combine_those():
    two = TwoWay(FORWARD, REVERSE)
    assert two.forward_links == {(0, 0), (2, 1)}
    assert two.reverse_links == {(0, 0), (1, 0), (2, 1)}  # a tie takes the first: source word 1 -> target 0
    for method in ("intersection", "union", "grow-diag-final-and"):
        assert two.links(method) == symmetrize(two.forward_links, two.reverse_links, method)


@pytest.mark.parametrize(
    "method, threshold, expected",
    [
        # the smaller of forward[j, i] and reverse[i, j]: (0,0) 0.6, (1,0) 0.4, (2,1) 0.8, the rest at most 0.1
        ("soft-intersection", 0.35, {(0, 0), (1, 0), (2, 1)}),
        ("soft-intersection", 0.5, {(0, 0), (2, 1)}),
        ("soft-intersection", 1.0, set()),
        # their mean: (0,0) 0.75, (1,0) 0.45, (2,1) 0.8, (1,1) 0.3
        ("soft-mean", 0.5, {(0, 0), (2, 1)}),
        ("soft-mean", 0.3, {(0, 0), (1, 0), (1, 1), (2, 1)}),
    ],
)
def test_the_soft_methods_link_where_the_two_models_weights_reach_the_threshold(method, threshold, expected):
    assert TwoWay(FORWARD, REVERSE).links(method, threshold) == expected


@pytest.mark.parametrize(
    "method, threshold, message",
    [
        ("soft-max", 0.3, r"^symmetrize='soft-max': use auto or one of intersection, .*soft-intersection, soft-mean$"),
        ("soft-mean", 0, r"^symmetrize_threshold=0: give a weight in \(0, 1\]"),
        ("soft-intersection", 1.5, r"^symmetrize_threshold=1.5: give a weight in \(0, 1\]"),
        ("soft-mean", "high", r"^symmetrize_threshold='high'"),
    ],
)
def test_a_bad_method_or_threshold_names_the_setting_and_what_it_takes(method, threshold, message):
    with pytest.raises(UserError, match=message):
        checked_method(method, threshold)


def test_every_method_is_accepted_with_a_threshold_in_range():
    assert [checked_method(m, 0.3) for m in TWO_MODEL_METHODS] == [(m, 0.3) for m in TWO_MODEL_METHODS]
    assert checked_method("union", 1) == ("union", 1.0)
