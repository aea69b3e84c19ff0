"""What a training DataLoader reads beyond a TokenizedCorpus: the items an epoch is made of (a
subset, repeated pairs included, and data.extra_train's files) and the subword links that
alignment-supervised batches carry."""

from pathlib import Path

import numpy as np

from qkvmt.data.batching import TokenizedCorpus
from qkvmt.errors import UserError


class Labelled:
    """A corpus whose items carry their subword links as a fourth element (empty: unlabelled)."""

    def __init__(self, corpus: TokenizedCorpus, links: list[np.ndarray | None]):
        self.corpus, self.links = corpus, links

    def __len__(self) -> int:
        return len(self.corpus)

    def __getitem__(self, i: int):
        links = self.links[int(i)]
        return (*self.corpus[i], links if links is not None else np.zeros((0, 2), np.int32))


class Subset:
    """A view of a corpus restricted to `keep`; items keep their index into the full corpus."""

    def __init__(self, corpus, keep: np.ndarray):
        self.corpus, self.keep = corpus, keep

    def __len__(self) -> int:
        return len(self.keep)

    def __getitem__(self, i: int):
        return self.corpus[self.keep[i]]


def extra_files(i: int, entry) -> tuple[Path, Path, int]:
    """One data.extra_train entry as (source file, target file, times per epoch), checked."""
    if not hasattr(entry, "keys") or not {"src", "tgt"} <= set(entry.keys()) <= {"src", "tgt", "repeat"}:
        raise UserError(
            f"data.extra_train[{i}] is {entry!r}: each entry names two line-parallel files, "
            "data.extra_train=[{src:PATH,tgt:PATH}], and may weight them up with repeat:N"
        )
    repeat = entry.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UserError(f"data.extra_train[{i}].repeat={repeat!r}: give a whole number of at least 1 (times per epoch)")
    return Path(str(entry["src"])), Path(str(entry["tgt"])), repeat
