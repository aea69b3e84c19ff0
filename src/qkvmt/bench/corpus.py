"""How the data pipeline scales: time and peak memory to tokenize and cache a large corpus.

The corpus is synthetic: real sentence pairs drawn with replacement up to the requested size
(the list holds references, so the text costs pointers, not copies). Each size is measured in
a fresh process, so one size's freed memory cannot hide the next one's. Memory is the resident
set, sampled every few milliseconds by a thread while `TokenizedCorpus.build` runs; the figure
reported is the peak above what the process held before. It should stay near one encoding
chunk plus the offsets (16 bytes a pair) whatever the corpus size: ids are streamed to disk
and memory-mapped.
"""

import multiprocessing
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from qkvmt.data.batching import TokenizedCorpus
from qkvmt.data.pairs import PairLists
from qkvmt.host.process_memory import RSS_READABLE, resident_bytes


class PeakMemory:
    """Context manager: the peak resident set above the level at entry, in bytes."""

    def __init__(self, interval_s: float = 0.005):
        self.interval_s, self.peak = interval_s, 0
        self._stop = threading.Event()

    def _watch(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, resident_bytes())
            time.sleep(self.interval_s)

    def __enter__(self):
        self.base = self.peak = resident_bytes()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, resident_bytes())
        self.delta = self.peak - self.base


def synthetic_pairs(src: list[str], tgt: list[str], n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    idx = np.random.default_rng(seed).integers(0, len(src), n)
    return [src[i] for i in idx], [tgt[i] for i in idx]


def tokenize_scaling(tokenizer, src: list[str], tgt: list[str], sizes: list[int]) -> list[dict]:
    """For each corpus size: seconds and peak extra memory to build the id cache, and its size."""
    if not RSS_READABLE:
        return [{"pairs": n, "error": "no /proc/self/statm: memory is measured on Linux only"} for n in sizes]
    spawn = multiprocessing.get_context("spawn")
    rows = []
    for n in sizes:
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            rows.append(pool.submit(_measure, tokenizer.to_str(), src, tgt, n).result())
    return rows


def _measure(tokenizer_json: str, src: list[str], tgt: list[str], n: int) -> dict:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    s, t = synthetic_pairs(src, tgt, n)
    with tempfile.TemporaryDirectory() as cache, PeakMemory() as mem:
        start = time.perf_counter()
        corpus = TokenizedCorpus.build(tokenizer, PairLists(s, t), Path(cache))
        seconds = time.perf_counter() - start
        ids_bytes = sum(f.stat().st_size for f in Path(cache).rglob("*") if f.is_file())
        tokens = int(corpus.src_off[-1] + corpus.tgt_off[-1])
        del corpus
    return {
        "pairs": n,
        "tokens": tokens,
        "seconds": seconds,
        "peak_extra_mb": mem.delta / 2**20,
        "cache_mb": ids_bytes / 2**20,
    }
