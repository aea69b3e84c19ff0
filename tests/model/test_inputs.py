"""One way from text to model inputs: encoding user text, and cutting, <s>/</s> and padding."""

import torch

from qkvmt.data.batching import Collate
from qkvmt.model.inputs import build_inputs, fits
from qkvmt.text.tokenizer import Specials
from qkvmt.text.tokenizer import BOS, EOS, PAD, encode, train_bpe

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
