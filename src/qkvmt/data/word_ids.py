"""Text to ids for the id cache, each distinct word encoded once: the ids qkvmt.text.tokenizer.encode
gives, at the speed of a dictionary lookup a word.

A corpus repeats its words (Zipf): a million pairs hold some hundred thousand distinct words, so
the tokenizer's pipeline (normalizer, pre-tokenizers, Encoding objects) runs for each distinct word
once instead of for every word; on 2 cores that pipeline managed about 11,000 pairs/s, too slow
for a WMT-sized corpus. It gives `encode`'s ids exactly where the tokenizer treats words one by
one: an NFKC (or no) normalizer that leaves the line as it is, pre-tokenizers that split at each
space first (Metaspace, then Punctuation), no added token that is not special, no literal "▁";
`fast_path` checks the tokenizer, and a line that does not qualify is encoded by `encode` itself.
"""

import contextlib
import itertools
import json
import multiprocessing
import unicodedata
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from qkvmt.text.tokenizer import WORD_START, encode

SPLITS_AT_SPACES = {"type": "Metaspace", "replacement": WORD_START, "prepend_scheme": "always", "split": True}
WITHIN_WORDS = ({"type": "Punctuation", "behavior": "Isolated"},)  # pre-tokenizers that split inside a word only
# Pairs encoded in this process before the source side moves to a process of its own: starting one
# costs about a second, which a small corpus (Multi30k's 29,000 pairs) would not win back.
PARALLEL_AFTER = 50_000
Encoded = tuple[np.ndarray, np.ndarray]  # (ids back to back, int32; tokens per line, int64)


def fast_path(tok) -> bool:
    """Whether `tok` encodes a line as the concatenation of its words' encodings (see the module)."""
    to_str = getattr(tok, "to_str", None)
    if to_str is None or getattr(tok, "truncation", None) or getattr(tok, "padding", None):
        return False
    config = json.loads(to_str())
    pre = config.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    return (
        config.get("normalizer") in (None, {"type": "NFKC"})
        and bool(steps)
        and steps[0] == SPLITS_AT_SPACES
        and all(step in WITHIN_WORDS for step in steps[1:])
        and all(t["special"] for t in config.get("added_tokens", []))
        and config["model"].get("type") == "BPE"
        and config["model"].get("dropout") is None
    )


class WordIds:
    """`encode` of a tokenizer that passes fast_path, as (ids of each line back to back, int32; tokens
    per line, int64), each distinct word encoded once and kept (at most `limit` words, then afresh)."""

    def __init__(self, tok, limit: int = 2_000_000):
        self.tok, self.limit = tok, limit
        self.forget()

    def forget(self) -> None:
        self.index: dict[str, int] = {}  # word -> its row in starts/lengths
        self.ids = np.zeros(0, np.int32)  # every known word's ids back to back
        self.starts = np.zeros(0, np.int64)
        self.lengths = np.zeros(0, np.int64)

    def __call__(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        words = [line.split() for line in lines]
        # NFKC leaves such a line (as encode gives it the tokenizer) and so its words as they are:
        # the line's pieces are its words' pieces
        fast = [
            WORD_START not in line and unicodedata.is_normalized("NFKC", " ".join(ws)) for line, ws in zip(lines, words)
        ]
        if not all(fast):
            words = [ws if ok else [] for ws, ok in zip(words, fast)]
        flat = list(itertools.chain.from_iterable(words))
        per_line = np.fromiter(map(len, words), np.int64, len(words))
        rows = np.fromiter(map(self.index.get, flat, itertools.repeat(-1)), np.int64, len(flat))
        unknown = np.flatnonzero(rows < 0)
        if len(unknown):
            new = {flat[k] for k in unknown}
            if len(self.index) + len(new) > self.limit:  # a bound on memory for a corpus of unbounded vocabulary
                self.forget()
                new = set(flat)
            self.learn(new)
            rows = np.fromiter(map(self.index.__getitem__, flat), np.int64, len(flat))  # the kept words may be new
        lengths = self.lengths[rows]
        # each token's place in self.ids: its word's start, then 0, 1, ... within the word
        within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        ids = self.ids[np.repeat(self.starts[rows], lengths) + within]
        ends = np.concatenate([[0], np.cumsum(lengths)])[np.cumsum(per_line)]
        line_lengths = np.diff(np.concatenate([[0], ends]))
        if all(fast):
            return ids, line_lengths
        return self.merged(lines, fast, ids, line_lengths)

    def learn(self, words: set[str]) -> None:
        """Encodes words not known yet (one encode_batch call) and keeps their ids."""
        new = list(words)
        encoded = encode(self.tok, new)
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        self.index.update(zip(new, range(len(self.lengths), len(self.lengths) + len(new))))
        self.starts = np.concatenate([self.starts, len(self.ids) + np.cumsum(lengths) - lengths])
        self.lengths = np.concatenate([self.lengths, lengths])
        self.ids = np.concatenate([self.ids, packed(encoded, lengths)])

    def merged(self, lines, fast, ids, line_lengths) -> tuple[np.ndarray, np.ndarray]:
        """The fast lines' ids with the others' (`encode` line by line) put in their places."""
        slow = iter(encode(self.tok, [line for line, ok in zip(lines, fast) if not ok]))
        pieces = np.split(ids, np.cumsum(line_lengths)[:-1])
        out = [piece if ok else np.array(next(slow), np.int32) for piece, ok in zip(pieces, fast)]
        return np.concatenate(out).astype(np.int32, copy=False), np.fromiter(map(len, out), np.int64, len(out))


def id_encoder(tok) -> Callable[[list[str]], tuple[np.ndarray, np.ndarray]]:
    """lines -> (their ids back to back, int32; tokens per line, int64), as `encode` gives them:
    WordIds where fast_path allows, else `encode` line by line."""
    if fast_path(tok):
        return WordIds(tok)

    def encoded(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = encode(tok, lines)
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        return packed(ids, lengths), lengths

    return encoded


def packed(ids: list[list[int]], lengths: np.ndarray) -> np.ndarray:
    """Lists of ids back to back as one int32 array."""
    return np.fromiter(itertools.chain.from_iterable(ids), np.int32, int(lengths.sum()))


def encoded_pairs(sides, chunks: Iterator[tuple[list[str], list[str]]], parallel_after: int = PARALLEL_AFTER):
    """Each chunk's (source, target) encoded by id_encoder of `sides` (the tokenizer of each side).
    After `parallel_after` pairs a second process encodes each chunk's source side while this one
    encodes its target side, so that two cores work (a tokenizer that fast_path refuses stays here)."""
    encoders = [id_encoder(side) for side in sides]
    with contextlib.ExitStack() as stack:
        worker, done = None, 0
        for src, tgt in chunks:
            if worker is None and done >= parallel_after and fast_path(sides[0]):
                spawn = multiprocessing.get_context("spawn")  # a fork would copy this process's threads' locks
                worker = stack.enter_context(
                    ProcessPoolExecutor(1, spawn, initializer=_start_worker, initargs=(sides[0].to_str(),))
                )
            if worker is None:
                yield encoders[0](src), encoders[1](tgt)
            else:
                source = worker.submit(_worker_ids, src)
                target = encoders[1](tgt)
                yield source.result(), target
            done += len(src)


_WORKER: list[WordIds] = []  # the worker process's encoder


def _start_worker(tokenizer_json: str) -> None:
    from tokenizers import Tokenizer

    _WORKER.append(WordIds(Tokenizer.from_str(tokenizer_json)))


def _worker_ids(lines: list[str]) -> Encoded:
    return _WORKER[0](lines)
