"""One way from text to model inputs: encoding user text, cutting, <s>/</s>, padding and token-budget batches."""

import numpy as np
import torch

from qkvmt.data.batching import Collate
from qkvmt.model.inputs import build_inputs, fits, token_budget_batches
from qkvmt.text.tokenizer import BOS, EOS, PAD, Specials, encode, train_bpe

SPECIALS = Specials(pad=0, bos=1, eos=2)


def tokenizer():
    return train_bpe(["a man is here .", "ein mann ist hier .", "< s > / pad"] * 20, 80)


def test_whitespace_runs_and_ends_do_not_make_tokens():
    tok = tokenizer()
    one = encode(tok, ["a man is here ."])[0]
    assert encode(tok, ["  a \t man  is here .  ", "a\u00a0man is here ."]) == [one, one]  # NBSP is whitespace too
    assert encode(tok, ["", "   ", "\t"]) == [[], [], []]  # a blank line stays empty


def test_typed_control_tokens_are_text():
    tok = tokenizer()
    specials = {tok.token_to_id(t) for t in (PAD, BOS, EOS)}
    for text in ("a <s> man", "here </s>", "<pad>"):
        ids = encode(tok, [text])[0]
        assert not specials & set(ids), text
        assert tok.decode(ids).replace(" ", "") == text.replace(" ", "")


def test_build_inputs_lays_out_source_and_shifted_target_and_pads():
    x = build_inputs([[5, 6, 7], [8]], [[9], [10, 11]], SPECIALS)
    assert x.src.tolist() == [[5, 6, 7, 2], [8, 2, 0, 0]]
    assert x.tgt_in.tolist() == [[1, 9, 0], [1, 10, 11]]
    assert x.tgt_out.tolist() == [[9, 2, 0], [10, 11, 2]]
    assert build_inputs([[5]], None, SPECIALS).tgt_in is None


def test_build_inputs_cuts_to_max_len_with_the_special_token_inside():
    x = build_inputs([[5, 6, 7, 8]], [[9, 10, 11, 12]], SPECIALS, max_len=3)
    assert x.src.tolist() == [[5, 6, 2]] and x.tgt_in.tolist() == [[1, 9, 10]] and x.tgt_out.tolist() == [[9, 10, 2]]
    assert fits(2, 3) and not fits(3, 3) and fits(10_000, None)


def test_training_batches_are_built_by_the_same_function():
    items = [(0, [5, 6, 7, 8], [9]), (1, [8], [10, 11, 12])]
    batch = Collate(SPECIALS, max_len=3)(items)
    x = build_inputs([i[1] for i in items], [i[2] for i in items], SPECIALS, max_len=3)
    for name in ("src", "tgt_in", "tgt_out"):
        assert torch.equal(batch[name], getattr(x, name))
    assert batch["ntokens"] == int((x.tgt_out != 0).sum())


def reference_inputs(src, tgt, specials, max_len):
    """build_inputs written row by row, as the layout above describes it."""
    keep = (lambda r: list(r)) if max_len is None else (lambda r: list(r)[: max_len - 1])

    def padded(rows):
        width = max(map(len, rows))
        return torch.tensor([r + [specials.pad] * (width - len(r)) for r in rows], dtype=torch.long)

    src, tgt = [keep(r) for r in src], [keep(r) for r in tgt]
    return (
        padded([r + [specials.eos] for r in src]),
        padded([[specials.bos] + r for r in tgt]),
        padded([r + [specials.eos] for r in tgt]),
    )


def test_build_inputs_equals_the_row_by_row_layout_for_lists_arrays_and_mapped_ids(tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 30_000, 5_000).astype(np.int32)
    ids.tofile(tmp_path / "ids")
    mapped = np.memmap(tmp_path / "ids", dtype=np.int32, mode="r")  # as a training corpus holds them
    for trial in range(60):
        rows = []
        for _ in range(int(rng.integers(1, 9))):
            start, n = int(rng.integers(0, 4_900)), int(rng.integers(0, 40))  # empty rows too
            rows.append([ids[start : start + n].tolist(), ids[start : start + n], mapped[start : start + n]][trial % 3])
        half = len(rows) // 2 or 1
        max_len = (None, 1, 5, 64)[int(rng.integers(0, 4))]  # 1: nothing but the special token
        x = build_inputs(rows[:half], rows[-half:], SPECIALS, max_len)
        for got, want in zip(
            (x.src, x.tgt_in, x.tgt_out), reference_inputs(rows[:half], rows[-half:], SPECIALS, max_len)
        ):
            assert got.dtype == torch.long and torch.equal(got, want)


def test_token_budget_batches_fit_the_budget_and_cover_every_sentence_once():
    lengths = np.random.default_rng(0).integers(1, 40, size=500)
    batches = token_budget_batches(lengths, 256, np.argsort(lengths, kind="stable"))
    for b in batches:
        assert len(b) * lengths[b].max() <= 256
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))


def test_a_sentence_longer_than_the_budget_gets_a_batch_of_its_own():
    lengths = np.array([3, 100, 4])
    batches = token_budget_batches(lengths, 50, np.argsort(lengths, kind="stable"))
    assert [b.tolist() for b in batches] == [[0, 2], [1]]
