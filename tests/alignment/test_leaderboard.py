"""The search over extractions against gold links: every candidate's links, the dev/test split, the
best chosen on dev and scored on test, the leaderboard and the reference aligner's row."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from qkvmt.alignment.leaderboard import (
    FIELDS,
    Candidates,
    Leaderboard,
    candidate_links,
    reference_scores,
    scored,
    split_gold,
)
from qkvmt.alignment.links import GoldAlignments, alignment_scores, word_groups
from qkvmt.alignment.policy import DIRECTIONS, ROWS, AlignmentPolicy
from qkvmt.analysis.forced import forced_attention
from qkvmt.errors import UserError
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.text.sinks import SINKS
from qkvmt.text.tokenizer import Specials, train_bpe
from tests.alignment.test_policy import CROSS, SRC_GROUPS, TGT_GROUPS, sink_free_words
from tests.alignment.test_reference import reversed_pairs


def test_every_candidate_links_each_pair_as_its_policy_does():
    found = Candidates()
    for _ in range(2):  # two pairs with the same map
        found.add("weights", CROSS, SRC_GROUPS, TGT_GROUPS)
    assert found.shapes == {"weights": (1, 2)} and found.heads_of("weights") == [0, 1, "mean"]
    # 1 layer × (2 heads + mean) × rows × directions × (every column, without the sinks)
    assert len(found.links) == 1 * 3 * len(ROWS) * len(DIRECTIONS) * 2
    for (signal, layer, head, rows, direction, drop), links in found.links.items():
        one = AlignmentPolicy(layer, head, rows, direction, signal, drop).links(CROSS, TGT_GROUPS, SRC_GROUPS)
        assert links == [one, one]
    assert {key[-1] for key in found.links} == {(), SINKS}


def test_a_pair_longer_than_the_models_positions_is_skipped():
    words = [f"w{i}" for i in range(12)]
    model = tiny_model([" ".join(words), " ".join("t" + w[1:] for w in words)], max_positions=8)
    gold = GoldAlignments(["w1 w2", " ".join(words)], ["t2 t1", " ".join("t" + w[1:] for w in words)], [], [])
    found = candidate_links(model, gold, ["weights", "value_norms"])
    assert (found.kept, found.skipped) == ([0], 1)
    assert found.shapes == {"weights": (2, 2), "value_norms": (2, 2)}
    # (weights twice, with and without the sinks; value norms once) × layers × (heads + mean) × ...
    assert len(found.links) == 3 * 2 * 3 * len(ROWS) * len(DIRECTIONS)
    assert all(len(links) == 1 for links in found.links.values())


def tiny_model(texts: list[str], max_positions: int = 64) -> SimpleNamespace:
    tok = train_bpe(texts, vocab_size=60)
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=tok.get_vocab_size(),
        d_model=16,
        n_heads=2,
        encoder_layers=1,
        decoder_layers=2,
        ffn_dim=32,
        max_positions=max_positions,
        **Specials.of(tok).config_fields(),
    )
    model = Transformer(cfg).eval()  # no dropout: every pass of a pair reads the same maps
    return SimpleNamespace(transformer=model, tokenizer=tok, meta=SimpleNamespace(full_context_layer=None))


def test_the_rows_without_the_sinks_score_the_links_of_the_renormalized_word_matrix():
    src = ["w1 , w2 .", "w3 w1 w2 .", "w2 , w3 !"]
    tgt = ["t2 t1 .", "t1 , t3 t2 .", "t3 t2 !"]
    sure = [{(0, 1), (2, 0), (3, 2)}, {(0, 2), (1, 0), (3, 4)}, {(0, 1), (2, 0), (3, 2)}]
    gold = GoldAlignments(src, tgt, sure, [set(), {(2, 3)}, set()])
    model = tiny_model(src + tgt)
    found = candidate_links(model, gold, ["weights"])
    board = Leaderboard.scored(found, split_gold(gold, found.kept, 0))
    assert found.kept == [0, 1, 2]
    for layer, head, direction in [(0, "mean", "target_to_source"), (1, 1, "source_to_target")]:
        hyp = []
        for s, t in zip(src, tgt):
            cross = forced_attention(model.transformer, model.tokenizer, s, t).map("cross")
            w = cross.layers[layer] if head == "mean" else cross.weights[layer, head]
            # </s>, punctuation, and the bare word-start mark a punctuation word begins with
            marks = [c.strip("▁") != "" and not c.strip("▁,.!") for c in cross.cols]
            sinks = {i for i, c in enumerate(cross.cols) if c == "</s>" or marks[i] or c == "▁" and marks[i + 1]}
            cols = [i if i in sinks else c for i, c in enumerate(cross.cols)]  # the sinks by position
            m = sink_free_words(w, cols, sinks, word_groups(cross.rows), word_groups(cross.cols))
            m = m if direction == "target_to_source" else m.T
            links = {(int(np.argmax(row)), j) for j, row in enumerate(m) if row.any()}
            hyp.append(links if direction == "target_to_source" else {(j, i) for i, j in links})
        key = ("weights", layer, head, "predicting", direction, SINKS)
        assert board.table[key] == alignment_scores(hyp, gold.sure, gold.possible)
    rows = board.rows(None)
    assert {tuple(row["drop"]) for row in rows} == {(), SINKS}  # the leaderboard lists both readings


# Three gold pairs, one link each; candidate A is right on the first only, B on the other two.
GOLD = GoldAlignments(["a", "b", "c"], ["x", "y", "z"], [{(0, 0)}, {(0, 1)}, {(1, 0)}], [set(), set(), set()])
A = ("s", 0, "mean", "predicting", "target_to_source", ())
B = ("s", 0, "mean", "reading", "target_to_source", ())
FOUND = Candidates(
    shapes={"s": (1, 0)},
    links={A: [{(0, 0)}, {(0, 0)}, {(0, 0)}], B: [{(1, 1)}, {(0, 1)}, {(1, 0)}]},
    kept=[0, 1, 2],
)


def test_the_best_is_chosen_on_the_dev_pairs_and_scored_on_the_rest():
    split = split_gold(GOLD, FOUND.kept, 1)
    assert (split.dev, split.test) == ([0], [1, 2])
    board = Leaderboard.scored(FOUND, split)
    best = board.best()
    assert best == dict(zip(FIELDS, A)) | {"drop": []} | scored(FOUND.links[A], split.sure, split.possible, [1, 2]) | {
        "dev_aer": 0.0
    }
    assert best["aer"] == 1.0  # its figure comes from the test pairs, which chose nothing
    assert [row["rows"] for row in board.rows(None)] == ["predicting", "reading"]  # by dev AER


def test_without_dev_pairs_the_best_is_the_best_on_every_pair():
    board = Leaderboard.scored(FOUND, split_gold(GOLD, FOUND.kept, 0))
    assert board.table[B]["aer"] < board.table[A]["aer"]  # right on two pairs of three, A on one
    assert board.best() == dict(zip(FIELDS, B)) | {"drop": []} | board.table[B]
    assert "dev_aer" not in board.best()
    assert [row["rows"] for row in board.rows(None)] == ["reading", "predicting"]


def test_the_reference_aligners_row_joins_the_leaderboard_in_its_place():
    split = split_gold(GOLD, FOUND.kept, 0)
    half = [{(0, 0)}, set(), set()]  # AER 0.5: between B (1/3) and A (2/3)
    reference = {"aligner": "eflomal", "symmetrization": "union"} | scored(half, split.sure, split.possible, [0, 1, 2])
    reference |= {"training_pairs": 3, "variants": {}}
    rows = Leaderboard.scored(FOUND, split).rows(reference)
    assert [row["signal"] for row in rows] == ["s", "eflomal (union)", "s"]
    assert rows[1] == dict.fromkeys(FIELDS) | {"signal": "eflomal (union)"} | scored(
        half, split.sure, split.possible, [0, 1, 2]
    )  # only the scores a candidate's row has


@pytest.mark.parametrize("kept,n_dev,part", [([1, 2], 1, "dev"), ([0], 1, "test")])
def test_a_split_with_an_empty_part_is_one_line(kept, n_dev, part):
    with pytest.raises(UserError, match=f"gold_dev={n_dev}: .* none is left for the {part} part"):
        split_gold(GOLD, kept, n_dev)


def test_layers_and_grid_hold_every_head_of_a_signal():
    found = Candidates()
    found.add("weights", CROSS, SRC_GROUPS, TGT_GROUPS)
    found.kept = [0]
    gold = GoldAlignments(["x1 x2"], ["y1 y2"], [{(1, 0), (0, 1)}], [set()])
    board = Leaderboard.scored(found, split_gold(gold, [0], 0))
    layers = board.layers("weights")
    assert list(layers) == ["layer0"] and list(layers["layer0"]) == ["head0", "head1", "mean"]
    assert (
        layers["layer0"]["head1"]["reading"]["intersection"]
        == board.table["weights", 0, 1, "reading", "intersection", ()]
    )
    best = board.best()
    grid = board.grid(best)
    assert grid.shape == (1, 3)
    assert grid[0, 2] == board.table["weights", 0, "mean", best["rows"], best["direction"], tuple(best["drop"])]["aer"]


def test_the_reference_aligner_is_scored_on_the_test_pairs_having_read_the_gold_sentences():
    src, tgt, truth = reversed_pairs(200)
    sure = truth[:3] + [{(0, 2), (1, 1), (2, 0)}]
    gold = GoldAlignments(src[:3] + ["w1 w2 w3"], tgt[:3] + ["T3 T2 T1"], sure, [set()] * 4)
    split = split_gold(gold, [0, 1, 2, 3], 1)
    result = reference_scores("eflomal", "intersection", (src[3:], tgt[3:]), gold, split, ("de", "en"))
    assert result["training_pairs"] == 197 and result["gold_pairs_in_training"] == 0
    assert set(result["variants"]) == {"forward", "reverse"} | {
        "intersection",
        "union",
        "grow-diag",
        "grow-diag-final",
        "grow-diag-final-and",
    }
    assert {k: result[k] for k in result["variants"]["intersection"]} == result["variants"]["intersection"]
    assert 0.0 <= result["dev_aer"] <= 1.0 and result["aer"] < 0.2  # the reversed pairs are easy
