"""Where each split's pairs come from and how they are read, for the DataModule.

A split is given by path (data.train, data.val, data.test: two line-parallel files or one TSV file)
or comes from data.source (the Multi30k layout's files, streamed; a Hugging Face dataset, in
memory). The training pairs are the train split's joined with data.extra_train's, without the
empty ones; they are streamed for everything but what genuinely needs all of them at once (the
reference aligner), and the tokenizer learns from a bounded sample of them.
"""

import hashlib
import logging

import numpy as np

from qkvmt.data.pairs import Joined, PairFiles, PairLists, hash_pairs, pair_lists, sample_pairs, split_files
from qkvmt.errors import UserError

log = logging.getLogger(__name__)
STAGES = ("train", "val", "test")


class SplitTexts:
    """The pairs of each stage ('train', 'val', 'test').

    paths: {stage: a data.train/val/test setting} for the splits given by path; the others are
    `splits[stage]` of `source`. extra_train: (source file, target file, times per epoch) each.
    tokenizer_sample: the most training pairs the tokenizer learns from, drawn with `seed`.
    """

    def __init__(self, source, splits: dict, paths: dict, extra_train, langs, tokenizer_sample: int, seed: int):
        self.source, self.splits, self.langs = source, splits, langs
        self.paths = {stage: split_files(value, f"data.{stage}") for stage, value in paths.items()}
        self.extra_train = [(PairFiles(src, tgt), repeat) for src, tgt, repeat in extra_train]
        self.tokenizer_sample, self.seed = tokenizer_sample, seed
        self.in_memory: dict[str, PairLists] = {}
        self.repeats: np.ndarray | None = None  # per training pair: how often an epoch holds it
        self.scanned: tuple[list[tuple[int, int]], str] | None = None  # (each part's counts, the digest)

    def pairs(self, stage: str):
        """A stage's pairs, re-iterable: its files streamed, or a Hugging Face dataset's lists."""
        if stage in self.paths:
            return self.paths[stage]
        split = self.splits[stage]
        if hasattr(self.source, "files"):
            return PairFiles(*self.source.files(split, *self.langs))
        if stage not in self.in_memory:
            self.in_memory[stage] = PairLists(*self.source.read(split, *self.langs))
        return self.in_memory[stage]

    def where(self, stage: str) -> str:
        if stage in self.paths:
            return f"data.{stage}={self.paths[stage]}"
        return f"the {stage} split {self.splits[stage]!r} in {self.source.root}"

    def read(self, stage: str) -> tuple[list[str], list[str]]:
        """A stage's sentences as lists (the validation and test sets decoded and scored whole)."""
        return pair_lists(self.pairs(stage))

    def check(self) -> None:
        """Reads the held-out splits given by path through once, so a bad line is found before anything is
        written (the training pairs are read through as they are counted)."""
        for stage in ("val", "test"):
            if stage in self.paths:
                for _ in self.paths[stage]:
                    pass

    def training(self) -> Joined:
        """The training pairs, streamed: the train split, then data.extra_train's, without empty pairs."""
        return Joined([self.pairs("train"), *(files for files, _ in self.extra_train)])

    def scan(self) -> tuple[list[tuple[int, int]], str]:
        """The training files read in two passes (hashing the sources, then the targets) for all a run
        needs of them whole: each part's pairs kept and all pairs, and the text's digest (with the language
        pair), which a tokenizer trained on it records and which finds the id cache built from it."""
        if self.scanned is None:
            h = hashlib.sha256(f"{self.langs[0]}-{self.langs[1]}\0".encode())
            training = self.training()
            hash_pairs(h, training)  # its passes count the pairs as they go
            self.scanned = training.counts, h.hexdigest()[:20]
        return self.scanned

    def training_repeats(self) -> np.ndarray:
        """How often each training pair enters an epoch; counted as the files are read through, which checks
        them and reports the extra pairs and the empty ones."""
        if self.repeats is None:
            counts = self.scan()[0]
            for (files, repeat), (_, total) in zip(self.extra_train, counts[1:]):
                each = f", each {repeat} times an epoch" if repeat > 1 else ""
                log.info("data.extra_train: %d pairs from %s%s", total, files, each)
            kept, total = (sum(c[i] for c in counts) for i in (0, 1))
            if not kept:
                look = "check those files" if "train" in self.paths else "check data.root and the files there"
                raise UserError(f"{self.where('train')} has no pair with text on both sides; {look}")
            if kept < total:
                log.warning("skipped %d training pairs with an empty side (of %d)", total - kept, total)
            times = [1] + [repeat for _, repeat in self.extra_train]
            self.repeats = np.repeat(np.array(times, dtype=np.int64), [k for k, _ in counts])
        return self.repeats

    def training_pairs(self) -> tuple[list[str], list[str]]:
        """The training pairs as lists, all in memory: for what needs them all at once (the reference
        aligner learns from the whole corpus); training itself streams them."""
        return pair_lists(self.training())

    def digest(self) -> str:
        """The training text's digest, streamed: what a tokenizer trained on it records."""
        return self.scan()[1]

    def vocabulary_sample(self) -> tuple[list[str], list[str]]:
        """What a vocabulary learns from: the training pairs, at most data.tokenizer_sample of them."""
        src, tgt, n = sample_pairs(self.training(), self.tokenizer_sample, self.seed)
        if n > len(src):
            log.info("the tokenizer learns from %d of the %d training pairs (data.tokenizer_sample)", len(src), n)
        return src, tgt
