"""The id cache's encoder against `encode` itself, on text chosen to break a word-by-word encoding."""

import multiprocessing
import random

import numpy as np
from tokenizers import pre_tokenizers

from qkvmt.data.word_ids import WordIds, encoded_pairs, fast_path, id_encoder
from qkvmt.text.tokenizer import encode, train_bpe

# NFKC changes (ligatures, full width, NBSP, ideographic space, a lone diaeresis), combining marks at a
# word's start, the word-start mark itself, typed control tokens, punctuation inside words, odd spaces
PIECES = (
    "Haus über Straße ﬁsh e\u0301 \u0301 \u00a0 \u3000 ▁ a▁b <s> </s> <pad> x.y „Hallo“ (1) ＡＢ ½ ¨ ǅ dog's — … ß İ"
)
PIECES = [*PIECES.split(" "), "\t", "  ", "\u200b", "\u2028", " \u0301", "e", "mann", ",", "ℌ"]


def hostile_lines(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(PIECES) + rng.choice(["", " ", "  "]) for _ in range(rng.randint(0, 12))) for _ in range(n)
    ]


def flat(ids: list[list[int]]) -> list[int]:
    return [i for x in ids for i in x]


def test_word_by_word_ids_are_encodes_on_text_made_to_break_them():
    lines = hostile_lines(4000)
    tok = train_bpe(lines[:2000], vocab_size=300)
    assert fast_path(tok)
    words = WordIds(tok, limit=50)  # forgets its words several times over
    got = [words(lines[i : i + 500]) for i in range(0, len(lines), 500)]
    expected = encode(tok, lines)
    assert np.concatenate([ids for ids, _ in got]).tolist() == flat(expected)
    assert np.concatenate([lengths for _, lengths in got]).tolist() == [len(x) for x in expected]


def test_a_tokenizer_that_does_not_split_at_spaces_first_is_encoded_line_by_line():
    lines = hostile_lines(300, seed=1)
    tok = train_bpe(lines, vocab_size=200)
    tok.pre_tokenizer = pre_tokenizers.Punctuation()  # spaces are no boundary: words are not its units
    assert not fast_path(tok)
    ids, lengths = id_encoder(tok)(lines)
    assert ids.tolist() == flat(encode(tok, lines)) and lengths.sum() == len(ids)


def test_the_source_side_encoded_in_a_second_process_gives_the_same_ids():
    lines = hostile_lines(600, seed=2)
    tok = train_bpe(lines, vocab_size=200)
    chunks = [(lines[i : i + 100], lines[i + 50 : i + 150]) for i in range(0, 500, 100)]
    pairs = encoded_pairs((tok, tok), iter(chunks), parallel_after=200)  # a process from the third chunk on
    got = [next(pairs) for _ in range(3)]
    assert multiprocessing.active_children()  # the worker, there while the chunks last
    got += list(pairs)
    for ((src_ids, src_lens), (tgt_ids, _)), (src, tgt) in zip(got, chunks, strict=True):
        assert src_ids.tolist() == flat(encode(tok, src)) and tgt_ids.tolist() == flat(encode(tok, tgt))
        assert src_lens.tolist() == [len(x) for x in encode(tok, src)]
