"""Token ids on disk, token-budget batches and padding.

Ids are cached as flat int32 arrays plus offsets and memory-mapped, so a corpus costs the
process no more memory than the pages it touches. Batches hold at most `max_tokens` padded
tokens and group sentences of similar length, so little of the budget goes to padding.
"""

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from qkvmt.alignment.supervision import label_matrix
from qkvmt.data.pairs import chunked, hash_pairs
from qkvmt.data.word_ids import encoded_pairs
from qkvmt.files import write_text
from qkvmt.model.inputs import build_inputs, token_budget_batches
from qkvmt.text.tokenizer import Specials, target_side


class TokenizedCorpus(Dataset):
    """Source and target token ids of one split, without special tokens.

    On disk: {src,tgt}.ids hold every sentence's ids back to back (raw int32, memory-mapped),
    {src,tgt}_off.npy where each sentence starts (N + 1 int64).
    """

    FORMAT = "ids-v3"  # part of the cache key: a new layout never reads an old cache

    def __init__(self, folder: Path):
        self.src, self.tgt = _memmap_ids(folder / "src.ids"), _memmap_ids(folder / "tgt.ids")
        self.src_off = np.load(folder / "src_off.npy")  # (N + 1,) start of each sentence
        self.tgt_off = np.load(folder / "tgt_off.npy")
        self.src_lens = np.diff(self.src_off)
        self.tgt_lens = np.diff(self.tgt_off)

    def __len__(self) -> int:
        return len(self.src_lens)

    def __getitem__(self, i: int) -> tuple[int, np.ndarray, np.ndarray]:
        i = int(i)
        return i, self.src[self.src_off[i] : self.src_off[i + 1]], self.tgt[self.tgt_off[i] : self.tgt_off[i + 1]]

    @classmethod
    def cache_key(cls, tokenizer_json: str, pairs: Iterable[tuple[str, str]], chunk: int = 10_000) -> str:
        h = hashlib.sha256(cls.FORMAT.encode())
        h.update(tokenizer_json.encode())
        hash_pairs(h, pairs, chunk)
        return h.hexdigest()[:20]

    @classmethod
    def build(
        cls,
        tokenizer,
        pairs: Iterable[tuple[str, str]],
        cache_dir: Path,
        chunk: int = 10_000,
        key: str | None = None,
        text: str | None = None,
    ) -> "TokenizedCorpus":
        """Encode once and reuse: the cache folder is keyed by tokenizer and text. `pairs`: (source,
        target) pairs, iterated afresh for each pass (qkvmt.data.pairs: files are streamed). The target
        side is encoded with the tokenizer's target side (Marian's target.spm); `key`: what names a
        tokenizer that has no JSON of its own (an imported model's), else its JSON. `text`: a digest of
        `pairs` already made (the training text's, qkvmt.data.texts), which then finds the folder again
        without reading the pairs to key it.

        Pairs are read and encoded `chunk` at a time and appended to disk, so memory beyond the
        offsets (16 bytes a pair) stays that of one chunk, whatever the corpus size. A build that
        fails (a bad line) leaves nothing behind.
        """
        if iter(pairs) is pairs:  # an iterator: the key's pass would leave nothing to encode
            raise TypeError("TokenizedCorpus.build needs pairs it can read more than once (qkvmt.data.pairs)")
        tokenizer_key = tokenizer.to_str() if key is None else key
        # The folder's name stays the hash of the pairs themselves, so caches built before `text` are found;
        # by-text/ maps the digest to it: two passes over a corpus of millions of pairs saved on each resume.
        alias = None
        if text is not None:
            name = hashlib.sha256(f"{cls.FORMAT}\0{tokenizer_key}\0{text}".encode()).hexdigest()[:20]
            alias = Path(cache_dir) / "by-text" / name
            if alias.exists() and built(found := Path(cache_dir) / alias.read_text()):
                return cls(found)
        folder = Path(cache_dir) / cls.cache_key(tokenizer_key, pairs, chunk)
        if not built(folder):
            tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
            tmp.mkdir(parents=True, exist_ok=True)
            try:
                _write_ids(tmp, (tokenizer, target_side(tokenizer)), pairs, chunk)
            except BaseException:
                shutil.rmtree(tmp)
                raise
            try:
                tmp.rename(folder)  # atomic: a concurrent builder may have won, which is fine
            except OSError:
                shutil.rmtree(tmp)
        if alias is not None:
            alias.parent.mkdir(exist_ok=True)
            write_text(alias, folder.name)
        return cls(folder)


def built(folder: Path) -> bool:
    """Whether a cache folder is whole: its last file (tgt_off.npy) is written only once the rest is."""
    return (folder / "tgt_off.npy").exists()


def _write_ids(folder: Path, sides, pairs, chunk: int) -> None:
    """{src,tgt}.ids and {src,tgt}_off.npy of `pairs`, encoded a chunk at a time."""
    lengths: tuple[list, list] = ([], [])
    with open(folder / "src.ids", "wb") as src_file, open(folder / "tgt.ids", "wb") as tgt_file:
        for encoded in encoded_pairs(sides, chunked(pairs, chunk)):
            for (ids, per_line), file, lens in zip(encoded, (src_file, tgt_file), lengths):
                lens.append(per_line)
                file.write(ids.tobytes())
    for name, lens in zip(("src", "tgt"), lengths):
        offsets = np.zeros(sum(map(len, lens)) + 1, dtype=np.int64)  # (N + 1,)
        if lens:
            np.cumsum(np.concatenate(lens), out=offsets[1:])
        np.save(folder / f"{name}_off.npy", offsets)


def _memmap_ids(path: Path) -> np.ndarray:
    # np.memmap cannot map an empty file. A plain array over the mapped pages: a memmap's own
    # slicing costs microseconds, and a training batch takes a slice per sentence and side.
    return np.memmap(path, dtype=np.int32, mode="r").view(np.ndarray) if path.stat().st_size else np.zeros(0, np.int32)


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Length-bucketed batches of at most `max_tokens` padded tokens, DDP-aware.

    Training (`shuffle=True`): each epoch ties are shuffled and the batch order permuted with
    (seed, epoch); the batch list is cut to a multiple of world_size and each rank takes every
    world_size-th batch, so every rank runs the same number of steps and none waits forever in
    a collective. A different tail is cut each epoch.
    Evaluation (`shuffle=False`): each rank takes every world_size-th sentence by length, so
    every sentence is in exactly one batch and each rank gets a share even of a tiny set.
    """

    def __init__(
        self,
        lengths,
        max_tokens: int,
        shuffle: bool,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        position: Callable[[], tuple[int, int]] | None = None,
    ):
        """position: called as each pass starts, gives (epoch, batches to skip), as set_epoch
        takes them; a DataModule passes its trainer's epoch and its resume position."""
        self.lengths = np.asarray(lengths)
        self.position = position
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.epoch, self.skip = 0, 0
        self.n_batches = len(token_budget_batches(self.lengths, max_tokens, np.argsort(self.lengths, kind="stable")))

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        """Batch order of `epoch`, leaving out its first `skip` batches (already trained on
        before a resume)."""
        self.epoch, self.skip = epoch, skip

    def batches(self) -> list[np.ndarray]:
        """This rank's batches for the current epoch."""
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")[self.rank :: self.world_size]
            return token_budget_batches(self.lengths, self.max_tokens, order)
        rng = np.random.default_rng((self.seed, self.epoch))
        perm = rng.permutation(len(self.lengths))
        order = perm[np.argsort(self.lengths[perm], kind="stable")]  # sorted, ties in random order
        batches = token_budget_batches(self.lengths, self.max_tokens, order)
        batches = [batches[j] for j in rng.permutation(len(batches))]
        batches = batches[: len(batches) - len(batches) % self.world_size]
        return batches[self.rank :: self.world_size]

    def __len__(self) -> int:
        return self.n_batches // self.world_size if self.shuffle else len(self.batches())

    def __iter__(self):
        if self.position is not None:
            self.set_epoch(*self.position())
        for b in self.batches()[self.skip :]:
            yield b.tolist()


def round_up(lengths, multiple: int):
    """Each length up to a multiple of `multiple` (1: as they are)."""
    return -(-np.asarray(lengths) // multiple) * multiple


class Collate:
    """Pads a batch with qkvmt.model.inputs: src = x </s>; tgt_in = <s> y; tgt_out = y </s>. With
    max_len, longer sentences are cut to fit (training filters them out instead; a validation or
    test pair is scored whole, and only its loss sees the cut). Items that carry subword links
    (a fourth element) add `align`, their (B, T, S) labels over tgt_out × src.

    length_multiple: each side padded up to a multiple of it (never past max_len), so batches take
    a few lengths: a compiled step specializes on a length's divisibility and recompiles when it
    changes, and tensor cores take rows of multiples of 8."""

    def __init__(self, specials: Specials, max_len: int | None = None, length_multiple: int = 1):
        self.specials, self.max_len, self.length_multiple = specials, max_len, length_multiple

    def padded(self, ids: torch.Tensor) -> torch.Tensor:
        length = int(round_up(ids.size(1), self.length_multiple))
        if self.max_len is not None:
            length = max(min(length, self.max_len), ids.size(1))
        return torch.nn.functional.pad(ids, (0, length - ids.size(1)), value=self.specials.pad)

    def __call__(self, items) -> dict:
        x = build_inputs([item[1] for item in items], [item[2] for item in items], self.specials, self.max_len)
        x.src, x.tgt_in, x.tgt_out = self.padded(x.src), self.padded(x.tgt_in), self.padded(x.tgt_out)
        index = torch.tensor([item[0] for item in items])
        batch = {
            "index": index,
            "src": x.src,
            "tgt_in": x.tgt_in,
            "tgt_out": x.tgt_out,
            "ntokens": int((x.tgt_out != self.specials.pad).sum()),
        }
        if len(items[0]) == 4:
            # each side's tokens after build_inputs' cut, without </s>
            real = [(t != self.specials.pad).sum(1) - 1 for t in (x.src, x.tgt_out)]
            lengths = list(zip(*(r.tolist() for r in real)))
            batch["align"] = label_matrix([item[3] for item in items], lengths, x.tgt_out.size(1), x.src.size(1))
        return batch
