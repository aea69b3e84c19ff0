"""Statistical word aligners beside attention, by name: today eflomal (Östling & Tiedemann 2016).

A reference aligner serves twice: as the reference row of align.py's AER report
(`reference_aligner=NAME`), and as the teacher of alignment-supervised training (Garg et al.
2019; `module.alignment.aligner=NAME`), whose word links are cached per corpus. Both, and the
data module that labels batches, find it in ALIGNERS: a new aligner is a class with
`require()` and `directional(src, tgt, langs)`, added there.

Links are between whitespace words, the ones attention alignments are made of
(qkvmt.alignment.links groups subwords by their "▁"). eflomal itself learns from those words
lowercased and Moses-tokenized (sacremoses), so that "Haus," and "Haus" are one word to it; a
link between two tokens links the whitespace words they come from. On RWTH that gives AER 35.5
against 36.4 for raw whitespace words (grow-diag-final-and, one run each; CHANGELOG.md).
It runs a forward and a reverse model; their links, both (source word, target word), are
combined by qkvmt.alignment.symmetrize.
"""

import hashlib
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from qkvmt.alignment.links import Link, parse_pharaoh
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.errors import UserError, optional_import
from qkvmt.files import hash_lines

log = logging.getLogger(__name__)


def reference_aligner(name: str, symmetrization: str, setting: str):
    """The aligner called `name`, its package checked: fails early, before any training or
    decoding, on a name we do not know, an unknown symmetrization or a missing package."""
    if name not in ALIGNERS:
        raise UserError(f"{setting}={name!r}: the reference aligner is one of {', '.join(ALIGNERS)}")
    if symmetrization not in METHODS:
        raise UserError(f"symmetrization {symmetrization!r}: use one of {', '.join(METHODS)}")
    aligner = ALIGNERS[name]()
    aligner.require()
    return aligner


class AlignerWords:
    """Each whitespace word of a language as the lowercased Moses tokens eflomal learns from;
    a word is tokenized once, alone, however often it occurs."""

    def __init__(self, lang: str):
        from sacremoses import MosesTokenizer

        self.moses, self.tokens = MosesTokenizer(lang=lang), {}

    def __call__(self, line: str) -> tuple[str, list[int]]:
        """The line as eflomal reads it, and for each of its tokens the whitespace word it is from."""
        tokens, owner = [], []
        for i, word in enumerate(line.split()):
            if word not in self.tokens:
                self.tokens[word] = [t.lower() for t in self.moses.tokenize(word, escape=False) if t.strip()] or [
                    word.lower()
                ]
            tokens += self.tokens[word]
            owner += [i] * len(self.tokens[word])
        return " ".join(tokens), owner


class Eflomal:
    """eflomal's forward and reverse models, learning from words lowercased and Moses-tokenized."""

    name = "eflomal"

    def require(self):
        return optional_import(
            "eflomal", "pip install eflomal (or pip install -e '.[align]'); it builds with a C compiler"
        )

    def directional(
        self, src: list[str], tgt: list[str], langs: tuple[str, str]
    ) -> tuple[list[set[Link]], list[set[Link]]]:
        """The forward and reverse links of each pair, both as (source word, target word) of
        whitespace words. langs: the source and target language codes, for Moses' rules."""
        eflomal = self.require()
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} source and {len(tgt)} target sentences")
        # One line per sentence (a newline inside one would shift every pair), of tokens that each
        # remember their whitespace word.
        src_words, tgt_words = AlignerWords(langs[0]), AlignerWords(langs[1])
        src_lines, src_owner = zip(*map(src_words, src)) if src else ((), ())
        tgt_lines, tgt_owner = zip(*map(tgt_words, tgt)) if tgt else ((), ())
        log.info("eflomal: aligning %d sentence pairs", len(src))
        with tempfile.TemporaryDirectory() as d:
            fwd, rev = Path(d) / "forward", Path(d) / "reverse"
            eflomal.Aligner().align(
                list(src_lines), list(tgt_lines), links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True
            )
            forward = [parse_pharaoh(line) for line in fwd.read_text().splitlines()]
            reverse = [parse_pharaoh(line) for line in rev.read_text().splitlines()]
        if len(forward) != len(src) or len(reverse) != len(src):
            raise RuntimeError(f"eflomal wrote {len(forward)}/{len(reverse)} link lines for {len(src)} pairs")

        def words(links: list[set[Link]]) -> list[set[Link]]:
            return [{(so[i], to[j]) for i, j in pairs} for pairs, so, to in zip(links, src_owner, tgt_owner)]

        return words(forward), words(reverse)


ALIGNERS = {"eflomal": Eflomal}


def with_gold(
    src: list[str], tgt: list[str], gold_src: list[str], gold_tgt: list[str]
) -> tuple[list[str], list[str], list[int]]:
    """The training pairs plus each gold pair that is not among them already, and each gold
    pair's position in the result. A gold pair the training data holds (added with
    data.extra_train) is not added again: eflomal aligns worse given the same sentences twice
    (on RWTH, AER 36.4 once and 40.7 twice; CHANGELOG.md)."""

    def key(s: str, t: str) -> tuple[str, str]:  # eflomal splits on whitespace: "a  b" is "a b"
        return " ".join(s.split()), " ".join(t.split())

    src, tgt = list(src), list(tgt)
    where = {key(s, t): k for k, (s, t) in enumerate(zip(src, tgt))}
    positions = []
    for s, t in zip(gold_src, gold_tgt):
        k = key(s, t)
        if k not in where:
            where[k] = len(src)
            src.append(s)
            tgt.append(t)
        positions.append(where[k])
    return src, tgt, positions


def symmetrized_links(
    aligner, src: list[str], tgt: list[str], langs: tuple[str, str], symmetrization: str = "grow-diag-final-and"
) -> list[set[Link]]:
    """Links (source word, target word) of each pair: the aligner's two directions combined by
    `symmetrization` (qkvmt.alignment.symmetrize.METHODS)."""
    if symmetrization not in METHODS:
        raise ValueError(f"unknown symmetrization {symmetrization!r}")
    forward, reverse = aligner.directional(src, tgt, langs)
    return [symmetrize(f, r, symmetrization) for f, r in zip(forward, reverse)]


def cached_links(
    aligner, src: list[str], tgt: list[str], langs: tuple[str, str], symmetrization: str, cache_dir: Path
) -> list[set[Link]]:
    """symmetrized_links, computed once per aligner, corpus and symmetrization and kept in
    `cache_dir` (beside the id cache), so a rerun or a resume does not realign. Aligners such as
    eflomal are stochastic: reusing the cached links is also what keeps a resumed run's labels
    the same."""
    h = hashlib.sha256(f"{aligner.name}-v2\0{langs[0]}-{langs[1]}\0{symmetrization}\0".encode())
    for side in (src, tgt):
        hash_lines(h, side)
    path = Path(cache_dir) / f"links_{h.hexdigest()[:20]}.npz"
    if path.exists():
        data = np.load(path)
        pairs, offsets = data["pairs"], data["offsets"]
        return [set(map(tuple, pairs[offsets[k] : offsets[k + 1]].tolist())) for k in range(len(offsets) - 1)]
    links = symmetrized_links(aligner, src, tgt, langs, symmetrization)
    offsets = np.zeros(len(links) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(x) for x in links])
    pairs = np.array([p for x in links for p in sorted(x)], dtype=np.int32).reshape(-1, 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.npz")
    np.savez(tmp, pairs=pairs, offsets=offsets)
    tmp.replace(path)  # atomic: a killed run leaves no half-written links
    return links
