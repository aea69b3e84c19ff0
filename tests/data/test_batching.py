"""The token-budget sampler, the DDP split of batches, cached ids and padding."""

import numpy as np
import pytest

from qkvmt.data.batching import Collate, TokenBudgetBatchSampler, TokenizedCorpus
from qkvmt.data.pairs import PairLists
from qkvmt.text.tokenizer import Specials, encode, train_bpe


@pytest.fixture
def lengths():
    return np.random.default_rng(0).integers(1, 40, size=500)


def test_length_bucketing_keeps_padding_low(lengths):
    sampler = TokenBudgetBatchSampler(lengths, 512, shuffle=True, seed=1)
    padded = sum(len(b) * lengths[b].max() for b in map(np.array, sampler))
    assert lengths.sum() / padded > 0.9


def test_shuffle_depends_on_seed_and_epoch_only(lengths):
    a = TokenBudgetBatchSampler(lengths, 256, shuffle=True, seed=3)
    b = TokenBudgetBatchSampler(lengths, 256, shuffle=True, seed=3)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first
    assert len(list(a)) == len(first) == len(a)


@pytest.mark.parametrize("world_size", [2, 3])
def test_ddp_ranks_get_distinct_batches_and_the_same_number(lengths, world_size):
    samplers = [
        TokenBudgetBatchSampler(lengths, 256, shuffle=True, seed=5, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    per_rank = [list(s) for s in samplers]
    assert len({len(p) for p in per_rank}) == 1
    assert all(len(p) == len(s) for p, s in zip(per_rank, samplers))
    seen = [i for p in per_rank for b in p for i in b]
    assert len(seen) == len(set(seen))  # no sentence on two ranks
    total = TokenBudgetBatchSampler(lengths, 256, shuffle=True, seed=5).n_batches
    assert len(per_rank[0]) == total // world_size


def test_evaluation_sampler_under_ddp_keeps_every_sentence(lengths):
    parts = [list(TokenBudgetBatchSampler(lengths, 256, shuffle=False, rank=r, world_size=3)) for r in range(3)]
    assert sorted(i for p in parts for b in p for i in b) == list(range(len(lengths)))


def test_every_rank_gets_evaluation_work_even_from_a_tiny_set():
    lengths = np.array([5, 6, 7])
    parts = [list(TokenBudgetBatchSampler(lengths, 10_000, shuffle=False, rank=r, world_size=2)) for r in range(2)]
    assert all(parts) and sorted(i for p in parts for b in p for i in b) == [0, 1, 2]


def test_collate_pads_and_shifts_targets():
    collate = Collate(Specials(pad=0, bos=1, eos=2))
    items = [(7, np.array([5, 6, 7]), np.array([8, 9])), (3, np.array([5]), np.array([8, 9, 10, 11]))]
    batch = collate(items)
    assert batch["index"].tolist() == [7, 3]
    assert batch["src"].tolist() == [[5, 6, 7, 2], [5, 2, 0, 0]]
    assert batch["tgt_in"].tolist() == [[1, 8, 9, 0, 0], [1, 8, 9, 10, 11]]
    assert batch["tgt_out"].tolist() == [[8, 9, 2, 0, 0], [8, 9, 10, 11, 2]]
    assert batch["ntokens"] == 3 + 5


def test_tokenized_corpus_matches_the_tokenizer_and_is_built_once(tmp_path):
    src = ["ein Hund läuft", "zwei Katzen", "ein Mann"] * 5
    tgt = ["a dog runs", "two cats", "a man"] * 5
    tok = train_bpe(src + tgt, vocab_size=60)
    corpus = TokenizedCorpus.build(tok, PairLists(src, tgt), tmp_path, chunk=4)  # several chunks
    assert len(corpus) == 15
    for i in (0, 7, 14):
        _, s, t = corpus[i]
        assert s.tolist() == encode(tok, [src[i]])[0] and t.tolist() == encode(tok, [tgt[i]])[0]
    (folder,) = tmp_path.iterdir()
    stamp = (folder / "src.ids").stat().st_mtime_ns
    again = TokenizedCorpus.build(tok, PairLists(src, tgt), tmp_path)
    assert (folder / "src.ids").stat().st_mtime_ns == stamp and len(again) == 15
    assert isinstance(corpus.src.base, np.memmap) and not corpus.src.flags.owndata  # ids are memory-mapped, not loaded


def test_set_epoch_skip_resumes_mid_epoch_with_the_remaining_batches():
    """After a resume k batches into an epoch, the sampler yields that epoch's batches from k on."""
    lengths = np.random.default_rng(0).integers(2, 30, size=200)
    sampler = TokenBudgetBatchSampler(lengths, max_tokens=120, shuffle=True, seed=3)
    sampler.set_epoch(2)
    whole = list(sampler)
    sampler.set_epoch(2, skip=5)
    assert list(sampler) == whole[5:]
    sampler.set_epoch(3)  # the next epoch is whole again
    assert len(list(sampler)) == len(whole)


def test_collate_pads_each_side_to_the_length_multiple_but_never_past_max_len():
    items = [(0, np.array([5, 6, 7]), np.array([8, 9])), (1, np.array([5]), np.array([8, 9, 10, 11, 12, 13]))]
    plain = Collate(Specials(pad=0, bos=1, eos=2))(items)
    batch = Collate(Specials(pad=0, bos=1, eos=2), length_multiple=4)(items)
    assert [batch[k].size(1) for k in ("src", "tgt_in", "tgt_out")] == [4, 8, 8]
    for key in ("src", "tgt_in", "tgt_out"):  # the same ids, then pads
        n = plain[key].size(1)
        assert batch[key][:, :n].tolist() == plain[key].tolist() and not batch[key][:, n:].any()
    assert batch["ntokens"] == plain["ntokens"]
    capped = Collate(Specials(pad=0, bos=1, eos=2), max_len=7, length_multiple=4)(items)
    assert [capped[k].size(1) for k in ("src", "tgt_in")] == [4, 7]
