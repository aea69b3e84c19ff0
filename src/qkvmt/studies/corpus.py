"""The word links of a corpus (`Model.align_corpus`, `qkvmt align src_file= tgt_file=`), read a
chunk at a time by the batched passes of qkvmt.alignment.corpus and streamed as Pharaoh lines
(qkvmt.results.corpus_alignment), by one model's policy or by two models symmetrized.

With a reference aligner (eflomal), it aligns the same pairs too, timed beside: it learns from the
whole corpus at once, so it holds the lines in memory."""

import sys
import time
from collections.abc import Iterable, Iterator
from itertools import islice, zip_longest

from tqdm import tqdm

from qkvmt.alignment.corpus import LayerReader, corpus_links
from qkvmt.alignment.links import Link, to_pharaoh
from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.alignment.reference import reference_aligner, symmetrized_links
from qkvmt.errors import UserError
from qkvmt.results.corpus_alignment import CorpusAlignment
from qkvmt.setting_types import whole_number
from qkvmt.studies.model_protocol import ModelLike
from qkvmt.studies.two_way import directions, method_of, symmetrization
from qkvmt.text.sources import LineFile


def chunks(src_lines: Iterable[str], tgt_lines: Iterable[str], size: int) -> Iterator[tuple[list[str], list[str]]]:
    """The pairs `size` at a time, in order: never more of the lines in memory."""
    pairs = zip_longest(src_lines, tgt_lines)
    while chunk := list(islice(pairs, size)):
        if any(s is None or t is None for s, t in chunk):
            if isinstance(src_lines, LineFile) and isinstance(tgt_lines, LineFile):  # counted equal, so changed since
                raise UserError(
                    f"{src_lines.path} or {tgt_lines.path} changed while being aligned: run again on files at rest"
                )
            raise UserError("src_lines and tgt_lines have different numbers of lines: give one target line per source")
        yield [s for s, _ in chunk], [t for _, t in chunk]


def streamed(
    src_lines, tgt_lines, forward: LayerReader, reverse: LayerReader | None, two: dict, batch_tokens: int, size: int
) -> Iterator[set[Link] | str]:
    """Each pair's links, or the reason it has none, as the chunks are aligned, with a progress bar."""
    total = len(src_lines) if hasattr(src_lines, "__len__") else None
    with tqdm(total=total, unit="pair", file=sys.stderr, dynamic_ncols=True) as bar:
        for sources, targets in chunks(src_lines, tgt_lines, size):
            yield from corpus_links(sources, targets, forward, reverse, max_tokens=batch_tokens, done=bar.update, **two)


def readers(
    model: ModelLike, reverse: ModelLike | None, policy: AlignmentPolicy, reading: dict, symmetrize: str, threshold
) -> tuple[LayerReader, LayerReader | None, dict, dict]:
    """The forward reader, the reverse one (with `reverse`), what the summary records of their
    policies, and corpus_links' symmetrization arguments (none for one model): one model reads by
    `policy`; two each by their own default, reading `reading` (rows and signal), symmetrized."""
    if reverse is None:
        return LayerReader(model, policy), None, {"policy": policy.to_dict()}, {}
    forward, back = directions(model, reverse, **reading)
    method, threshold = symmetrization(symmetrize, threshold, forward, back)
    recorded = {
        "policies": {"forward": forward.policy.to_dict(), "reverse": back.policy.to_dict()},
        **method_of(method, threshold),
        "reverse_ckpt_path": [str(p) for p in reverse.paths],
    }
    two = {"symmetrization": method, "threshold": threshold}
    return LayerReader(model, forward.policy), LayerReader(reverse, back.policy), recorded, two


def reference_links(name: str, symmetrization: str, src_lines, tgt_lines, langs) -> tuple[list[str], dict]:
    """The reference aligner's Pharaoh line for every pair (empty where a side is empty), and
    what the summary records of it: its settings and its own time, reading the lines excluded."""
    aligner = reference_aligner(name, symmetrization, "reference_aligner")
    src, tgt = list(src_lines), list(tgt_lines)
    kept = [k for k, (s, t) in enumerate(zip(src, tgt)) if s.split() and t.split()]
    start = time.perf_counter()
    found = symmetrized_links(aligner, [src[k] for k in kept], [tgt[k] for k in kept], langs, symmetrization)
    seconds = time.perf_counter() - start
    lines = [""] * len(src)
    for k, links in zip(kept, found):
        lines[k] = to_pharaoh(links)
    return lines, {
        "aligner": name,
        "symmetrization": symmetrization,
        "seconds": round(seconds, 3),
        "pairs_per_second": round(len(src) / seconds, 1) if seconds > 0 else None,
    }


def checked_lines(src_lines, tgt_lines, reference: str | None) -> None:
    """Lines, not texts; and lines that can be read twice where a reference aligner reads them too."""
    if isinstance(src_lines, str) or isinstance(tgt_lines, str):
        raise UserError("src_lines and tgt_lines are lists of sentences, one pair per position: give lists, not texts")
    if reference and any(iter(lines) is lines for lines in (src_lines, tgt_lines)):
        raise UserError("reference_aligner reads the lines again: give lists (or files), not iterators read once")


def align_corpus(
    model: ModelLike,
    src_lines: Iterable[str],
    tgt_lines: Iterable[str],
    reverse: ModelLike | None,
    policy: AlignmentPolicy,
    reading: dict,
    symmetrize: str = "auto",
    threshold: float | None = None,
    batch_tokens: int = 16384,
    chunk_pairs: int = 4096,
    reference: tuple[str | None, str] = (None, "grow-diag-final-and"),
) -> CorpusAlignment:
    """The corpus's links, streamed (qkvmt.results.corpus_alignment); `reference`: a reference
    aligner's name (None: none) and its symmetrization."""
    batch_tokens, chunk_pairs = whole_number("batch_tokens", batch_tokens), whole_number("chunk_pairs", chunk_pairs)
    checked_lines(src_lines, tgt_lines, reference[0])
    if reference[0]:  # installed? before the slow part
        reference_aligner(*reference, "reference_aligner")
    forward, back, recorded, two = readers(model, reverse, policy, reading, symmetrize, threshold)
    links = streamed(src_lines, tgt_lines, forward, back, two, batch_tokens, chunk_pairs)
    settings = {"ckpt_path": [str(p) for p in model.paths], **recorded, "batch_tokens": batch_tokens}
    langs = (model.meta.src_lang, model.meta.tgt_lang)
    return CorpusAlignment(
        links,
        settings | {"chunk_pairs": chunk_pairs},
        model.transformer.cfg.max_positions,
        (lambda: reference_links(*reference, src_lines, tgt_lines, langs)) if reference[0] else None,
    )
