import math

import numpy as np
import pytest
import torch

from qkvmt.alignment.supervision import AlignmentSupervision, alignment_loss, label_matrix, subword_links
from qkvmt.data.batching import Collate
from qkvmt.errors import UserError
from qkvmt.text.tokenizer import Specials


def test_word_links_become_links_between_every_piece_of_the_two_words():
    src = ["▁Ein", "▁Haus", "boot", "▁.", "</s>"]  # words: Ein | Hausboot | .
    tgt = ["▁A", "▁house", "▁boat", "▁.", "</s>"]  # words: A | house | boat | .
    links = {(0, 0), (1, 1), (1, 2), (2, 3)}
    pairs = subword_links(links, src, tgt, "Ein Hausboot .", "A house boat .")
    assert sorted(map(tuple, pairs.tolist())) == [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 3)]


def test_a_pair_whose_pieces_do_not_make_the_aligners_words_is_left_unlabelled():
    assert subword_links({(0, 0)}, ["▁Ein", "▁Haus"], ["▁A", "▁house"], "Ein Haus boot", "A house") is None


def test_labels_index_target_rows_then_source_columns_and_drop_links_past_a_cut():
    pairs = np.array([[0, 1], [2, 0], [5, 1]])  # (source position, target position); source 5 was cut
    labels = label_matrix([pairs, np.zeros((0, 2))], lengths=[(3, 2), (1, 1)], t_len=3, s_len=4)
    assert labels.shape == (2, 3, 4)
    assert labels[0].nonzero().tolist() == [[0, 2], [1, 0]] and not labels[1].any()


def test_collate_carries_the_labels_of_items_with_links_over_tgt_out_and_src():
    items = [
        (0, np.array([5, 6]), np.array([7, 8, 9]), np.array([[0, 2], [1, 0]])),
        (1, np.array([5]), np.array([7]), np.zeros((0, 2))),
    ]
    batch = Collate(Specials(pad=0, bos=1, eos=2))(items)
    assert batch["align"].shape == (2, 4, 3)  # tgt_out: y1 y2 y3 </s>; src: x1 x2 </s>
    assert batch["align"][0].nonzero().tolist() == [[0, 1], [2, 0]] and not batch["align"][1].any()
    assert "align" not in Collate(Specials(pad=0, bos=1, eos=2))([it[:3] for it in items])


def test_the_loss_is_the_cross_entropy_with_the_uniform_distribution_over_linked_sources():
    torch.manual_seed(0)
    attention = torch.softmax(torch.randn(2, 3, 4), -1).requires_grad_()
    labels = torch.zeros(2, 3, 4, dtype=torch.bool)
    labels[0, 0, 1] = True
    labels[0, 2, [0, 3]] = True  # one target token linked to two sources: half the mass each
    labels[1, 1, 2] = True
    a = attention.detach()
    by_hand = [-math.log(a[0, 0, 1]), -(math.log(a[0, 2, 0]) + math.log(a[0, 2, 3])) / 2, -math.log(a[1, 1, 2])]
    loss = alignment_loss(attention, labels)
    assert loss.item() == pytest.approx(sum(by_hand) / 3, rel=1e-5)
    loss.backward()
    assert attention.grad[0, 1].abs().sum() == 0 and attention.grad[1, 0].abs().sum() == 0  # unlabelled rows


def test_no_labelled_row_gives_zero_loss_that_still_has_a_graph():
    attention = torch.softmax(torch.randn(1, 2, 3), -1).requires_grad_()
    loss = alignment_loss(attention, torch.zeros(1, 2, 3, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0 and attention.grad is not None


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"weight": 0.1, "layer": 3}, r"module.alignment.layer=3: the decoder has 3 layers"),
        ({"weight": 0.1, "layer": -4}, r"module.alignment.layer=-4"),
        ({"weight": 0.1, "head": 4}, r"module.alignment.head=4: the model has 4 heads \(0..3\)"),
        ({"weight": -1.0}, r"module.alignment.weight=-1.0"),
        ({"weight": 0.1, "labels": "diag"}, r"module.alignment.labels='diag'.*grow-diag-final-and"),
    ],
)
def test_a_supervised_layer_or_head_beyond_the_model_is_a_user_error(settings, message):
    with pytest.raises(UserError, match=message):
        AlignmentSupervision(**settings).validated(n_layers=3, n_heads=4)


def test_a_negative_layer_counts_from_the_end():
    assert AlignmentSupervision(weight=0.05, layer=-2).validated(n_layers=3, n_heads=4).layer == 1


def test_with_supervision_off_the_default_layer_fits_any_decoder():
    off = AlignmentSupervision(weight=0.0, layer=-2)  # the default layer, for a 1-layer decoder
    assert off.validated(n_layers=1, n_heads=4) == off and not off.validated(n_layers=1, n_heads=4).on
