"""Batched links of a corpus: every pair's links are those the one-sentence path gives it alone
(Model.align, or align_both's both_ways with two models), whatever batch it shares with pairs of
other lengths; pairs that cannot be linked give their reason, in place."""

import pytest
import torch

import qkvmt
from qkvmt.alignment.corpus import EMPTY, TOO_LONG, UNGROUPED, LayerReader, corpus_links
from qkvmt.alignment.directions import SOFT_THRESHOLD, Direction, both_ways
from qkvmt.alignment.links import to_pharaoh
from qkvmt.alignment.supervision import AlignmentSupervision
from qkvmt.errors import UserError
from qkvmt.text.sources import read_lines

ODD = [
    ("w1, w2 ä w3", "t3 t2 t1"),  # punctuation glued to a word, a character outside the vocabulary
    ("w1", "t1"),
    ("w5 w6 w7 w8 w9 w10 w11 w12 w13", "t13"),  # sides of very different lengths
    ("w2", "t1 t1 t1 t1 t1 t1 t1 t1 t1 t1 t1"),
]


def pairs_of(run, n: int = 36) -> tuple[list[str], list[str]]:
    """n training pairs of the toy corpus (2 to 9 words a side) and the odd ones."""
    src = read_lines(run["corpus"] / "train.de.gz")[:n]
    tgt = read_lines(run["corpus"] / "train.en.gz")[:n]
    return src + [s for s, _ in ODD], tgt + [t for _, t in ODD]


def one_by_one(model, policy, src: list[str], tgt: list[str]) -> list[str]:
    """The oracle: each pair aligned alone, as qkvmt align sentence= reference= does."""
    return [model.align(s, t, policy).pharaoh for s, t in zip(src, tgt)]


def batched(
    src, tgt, forward, reverse=None, method="grow-diag-final-and", max_tokens=100_000, threshold=SOFT_THRESHOLD
) -> list[str]:
    found = corpus_links(src, tgt, forward, reverse, method, threshold, max_tokens)
    assert not any(isinstance(links, str) for links in found)
    return [to_pharaoh(links) for links in found]


@pytest.fixture(scope="module")
def model(trained_run):
    return qkvmt.load(trained_run["run"] / "checkpoints" / "last.ckpt", device="cpu")


@pytest.mark.parametrize(
    "policy",
    [
        None,  # the checkpoint's default: layer 0's head average, target to source
        {"layer": 1, "head": 2, "rows": "reading", "direction": "source_to_target"},
        {"layer": -1, "head": "mean", "direction": "intersection"},
    ],
)
def test_batched_links_are_each_pairs_own(model, trained_run, policy):
    src, tgt = pairs_of(trained_run)
    pol = model.policy(policy)
    expected = one_by_one(model, pol, src, tgt)
    reader = LayerReader(model, pol)
    # One batch padded to the longest pair, and batches of one pair each (no padding at all)
    assert batched(src, tgt, reader) == expected
    assert batched(src, tgt, reader, max_tokens=1) == expected
    assert len(set(expected)) > len(expected) // 2  # links that differ from pair to pair: a real test


def test_a_full_context_head_is_read_without_the_causal_mask_as_align_reads_it(trained_run, tmp_path):
    # The last layer marked as a head supervised with full context: read so, by both paths.
    raw = torch.load(trained_run["run"] / "checkpoints" / "last.ckpt", weights_only=True)
    raw["qkvmt"]["alignment"] = AlignmentSupervision(weight=1.0, layer=1, head=1, full_context=True).to_dict()
    torch.save(raw, tmp_path / "full.ckpt")
    model = qkvmt.load(tmp_path / "full.ckpt", device="cpu")
    src, tgt = pairs_of(trained_run)
    for policy in (None, {"direction": "target_to_source"}, {"layer": 0}):  # layer 0: the causal pass
        pol = model.policy(policy)
        reader = LayerReader(model, pol)
        assert reader.full_context == (pol.layer == 1)
        assert batched(src, tgt, reader) == one_by_one(model, pol, src, tgt)
    # and the reading differs from the causal one's, so the test can tell them apart
    causal = LayerReader(model, model.policy(None))
    causal.full_context = False
    assert batched(src, tgt, causal) != batched(src, tgt, LayerReader(model, model.policy(None)))


def test_a_head_trained_with_full_context_gives_each_pairs_own_links(supervised_run):
    model = qkvmt.load(supervised_run["run"] / "checkpoints" / "last.ckpt", device="cpu")
    assert model.meta.full_context_layer == 1
    src, tgt = pairs_of(supervised_run)
    expected = one_by_one(model, model.default_policy, src, tgt)
    assert batched(src, tgt, LayerReader(model, model.default_policy)) == expected


def test_two_models_give_the_symmetrized_links_of_each_pair(trained_run, reverse_run):
    forward = qkvmt.load(trained_run["run"] / "checkpoints" / "last.ckpt", device="cpu")
    reverse = qkvmt.load(reverse_run["run"] / "checkpoints" / "last.ckpt", device="cpu")
    f, r = Direction(forward), Direction(reverse)
    src, tgt = pairs_of(trained_run)
    readers = LayerReader(forward, f.policy), LayerReader(reverse, r.policy)
    methods = (("grow-diag-final-and", 0.3), ("union", 0.3), ("soft-mean", 0.2), ("soft-intersection", 0.1))
    for method, threshold in methods:
        expected = [to_pharaoh(both_ways(f, r, s, t, t).links(method, threshold)) for s, t in zip(src, tgt)]
        assert batched(src, tgt, *readers, method, threshold=threshold) == expected
        assert batched(src, tgt, *readers, method, max_tokens=1, threshold=threshold) == expected


def test_pairs_without_links_keep_their_place_with_the_reason(model, trained_run):
    src, tgt = pairs_of(trained_run, n=6)
    long = " ".join(f"w{i % 40}" for i in range(300))  # over the tiny model's 256 positions
    src_in = [src[0], "", src[1], long, src[2], "w1 ▁ w2", src[3], "   "]
    tgt_in = [tgt[0], tgt[0], tgt[1], tgt[3], tgt[2], "t2 t1", tgt[3], tgt[3]]
    done = []
    found = corpus_links(src_in, tgt_in, LayerReader(model, model.default_policy), max_tokens=64, done=done.append)
    # a typed "▁" is a subword of its own: four groups for three words, so no links rather than wrong ones
    assert [r for r in found if isinstance(r, str)] == [EMPTY, TOO_LONG, UNGROUPED, EMPTY]
    kept = [i for i, r in enumerate(found) if not isinstance(r, str)]
    assert kept == [0, 2, 4, 6]
    expected = one_by_one(model, model.default_policy, [src_in[i] for i in kept], [tgt_in[i] for i in kept])
    assert [to_pharaoh(found[i]) for i in kept] == expected
    assert sum(done) == len(src_in)  # the progress counts every pair once


def test_a_signal_other_than_the_weights_is_refused(model):
    with pytest.raises(UserError, match=r"alignment.signal=value_norms: src_file= aligns a corpus by attention"):
        LayerReader(model, model.policy({"signal": "value_norms"}))
