"""Sentence pairs as a stream: a split's files given by path (two line-parallel files, or one file of
`source<TAB>target` lines), a source's lists in memory, the training pairs joined from several of
them; read in chunks, hashed side by side and sampled without ever holding the whole text.

Every kind is re-iterable (each pass reads afresh), so a corpus larger than memory is read once to
hash it and once more to encode it.
"""

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from qkvmt.errors import UserError
from qkvmt.files import feed_lines
from qkvmt.text.sources import checked_file, parallel_lines, tsv_lines

Chunk = tuple[list[str], list[str]]  # (sources, targets) of consecutive pairs


class PairFiles:
    """The pairs of two line-parallel files (plain or .gz), or of one file of source<TAB>target lines."""

    def __init__(self, *paths: Path):
        self.paths = tuple(checked_file(p) for p in paths)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return parallel_lines(*self.paths) if len(self.paths) == 2 else tsv_lines(self.paths[0])

    def __str__(self) -> str:
        return " and ".join(map(str, self.paths))


class PairLists:
    """Pairs already in memory (a Hugging Face dataset's split): two lists of one length."""

    def __init__(self, src: list[str], tgt: list[str]):
        self.src, self.tgt = src, tgt

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return zip(self.src, self.tgt)


class Joined:
    """Several pair streams one after the other, without the pairs that have an empty side (they carry no
    signal); each pass read to the end counts, per part, the pairs kept and all pairs (`counts`), so a pass
    made for another purpose (hashing) counts them too."""

    def __init__(self, parts: list[Iterable[tuple[str, str]]]):
        self.parts = parts
        self.counts: list[tuple[int, int]] | None = None  # (kept, all) per part, of the last whole pass

    def __iter__(self) -> Iterator[tuple[str, str]]:
        counts = []
        for part in self.parts:
            kept = total = 0
            for s, t in part:
                total += 1
                if s and t:
                    kept += 1
                    yield s, t
            counts.append((kept, total))
        self.counts = counts


def split_files(value, setting: str) -> PairFiles:
    """A split given by path (data.train, data.val, data.test): [SRC_FILE, TGT_FILE] or one TSV file;
    a file that is missing is a UserError naming it, before anything is read."""
    paths = [value] if isinstance(value, str | Path) else list(value) if hasattr(value, "__iter__") else []
    if len(paths) not in (1, 2) or not all(isinstance(p, str | Path) for p in paths):
        raise UserError(
            f"{setting}={value!r}: give two line-parallel files, {setting}=[SRC_FILE,TGT_FILE], or one file of "
            f"source<TAB>target lines, {setting}=FILE (plain or .gz)"
        )
    return PairFiles(*map(Path, paths))


def pair_lists(pairs: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """All the pairs, as a list of sources and one of targets."""
    listed = list(pairs)
    return [s for s, _ in listed], [t for _, t in listed]


def chunked(pairs: Iterable[tuple[str, str]], size: int) -> Iterator[Chunk]:
    """Consecutive pairs, `size` at a time, as (sources, targets)."""
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield [s for s, _ in chunk], [t for _, t in chunk]


def hash_pairs(h, pairs: Iterable[tuple[str, str]], chunk: int = 10_000) -> None:
    """Both sides into hash `h` as qkvmt.files.hash_lines puts two lists, sources then targets (two passes),
    so a streamed corpus has the digest its lists would have."""
    for side in (0, 1):
        for part in chunked(pairs, chunk):
            feed_lines(h, part[side])
        h.update(b"\0")


def sample_pairs(pairs: Iterable[tuple[str, str]], bound: int, seed: int) -> tuple[list[str], list[str], int]:
    """At most `bound` pairs drawn uniformly without replacement (reservoir sampling, seeded), in corpus
    order, and how many pairs there were: a corpus of `bound` pairs or fewer comes back whole, as it is."""
    rng = np.random.default_rng(seed)
    src: list[str] = []
    tgt: list[str] = []
    index: list[int] = []
    n = 0
    for s_chunk, t_chunk in chunked(pairs, 100_000):
        fill = min(len(s_chunk), max(bound - n, 0))
        src += s_chunk[:fill]
        tgt += t_chunk[:fill]
        index += range(n, n + fill)
        if fill < len(s_chunk):  # pair number i (0-based) takes slot j, drawn from 0..i, if j < bound
            at = np.arange(n + fill, n + len(s_chunk))
            slots = rng.integers(0, at + 1)
            for k in np.flatnonzero(slots < bound):  # in order: a later pair replaces an earlier one
                j = slots[k]
                src[j], tgt[j], index[j] = s_chunk[fill + k], t_chunk[fill + k], int(at[k])
        n += len(s_chunk)
    if n <= bound:
        return src, tgt, n
    order = np.argsort(index)
    return [src[i] for i in order], [tgt[i] for i in order], n
