"""What a training DataLoader reads beyond a TokenizedCorpus: the items an epoch is made of (a
subset, repeated pairs included, and data.extra_train's files) and the subword links that
alignment-supervised batches carry."""

from pathlib import Path

import numpy as np

from qkvmt.alignment.supervision import subword_links
from qkvmt.data.batching import TokenizedCorpus
from qkvmt.errors import UserError
from qkvmt.setting_types import whole_number
from qkvmt.text.tokenizer import target_side


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
    whole_number(f"data.extra_train[{i}].repeat", repeat)  # times per epoch
    return Path(str(entry["src"])), Path(str(entry["tgt"])), repeat


def subword_labels(tokenizer, corpus: TokenizedCorpus, words: list, src: list[str], tgt: list[str]):
    """Each pair's reference word links (`words`) as subword (source, target) position pairs; None for a
    pair whose subwords do not group into the whitespace words the aligner saw."""
    # each side's token names (one joint BPE: the same; Marian's target: target_vocab.json's)
    src_names, tgt_names = (
        [tok.id_to_token(i) for i in range(tok.get_vocab_size())] for tok in (tokenizer, target_side(tokenizer))
    )
    links = []
    for k, (_, s_ids, t_ids) in enumerate(corpus):
        tokens = [src_names[t] for t in s_ids], [tgt_names[t] for t in t_ids]
        links.append(subword_links(words[k], *tokens, src[k], tgt[k]))
    return links
