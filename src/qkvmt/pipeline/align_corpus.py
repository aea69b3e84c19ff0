"""qkvmt align src_file= tgt_file=: the word links of a corpus, one Pharaoh line per sentence pair
(as fast_align, eflomal and awesome-align write them), read by the batched passes of
qkvmt.alignment.corpus. This module does the command-line work: the settings and files checked
before the model loads, the files read a chunk at a time, the output staged, the summary.

With reference_aligner=eflomal, eflomal aligns the same pairs too (reference.pharaoh), timed
beside: it learns from the whole corpus at once, so it holds the files in memory.

Per line: line i of alignment.pharaoh (and of reference.pharaoh) is always pair i. A pair with
an empty side, with a side longer than the model's positions, or whose subwords do not group
into its whitespace words gets an empty line; corpus.json counts each kind, and a warning names
the lines of the last two.
"""

import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice, zip_longest
from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from qkvmt.alignment.corpus import EMPTY, REASONS, TOO_LONG, UNGROUPED, LayerReader, corpus_links
from qkvmt.alignment.links import to_pharaoh
from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.alignment.reference import reference_aligner, symmetrized_links
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import atomic_write, write_json, write_text
from qkvmt.pipeline.align_both import both_directions, method_of, symmetrization
from qkvmt.pipeline.runs import StagedOutput
from qkvmt.text.sources import checked_file, read_lines, stream_lines

log = logging.getLogger(__name__)

PHARAOH, SUMMARY = "alignment.pharaoh", "corpus.json"  # the names align_both's gold mode gives its links
REFERENCE = "reference.pharaoh"  # with reference_aligner=: its links of the same pairs
FIRST_LINES = 10  # the line numbers of skipped pairs a summary and a warning name

# What each other mode's setting would do instead, for the one-line refusal of a mix.
OTHER_MODES = {
    "sentence": "aligns one sentence",
    "reference": "gives one sentence's translation",
    "gold_dir": "scores every head against gold links",
}


@dataclass(frozen=True)
class CorpusFiles:
    src: Path
    tgt: Path
    pairs: int  # lines of each
    batch_tokens: int  # tokens of a forced pass, both sides, padded
    chunk_pairs: int  # pairs read, sorted and aligned at a time


def corpus_files(cfg: DictConfig) -> CorpusFiles | None:
    """The files of src_file= and tgt_file=, checked before the model loads (None: neither is
    given): both given, no other mode's setting beside them, both readable UTF-8 text of equal
    line counts. Counting reads each file once, a line at a time."""
    if not (cfg.src_file or cfg.tgt_file):
        return None
    if not (cfg.src_file and cfg.tgt_file):
        given, missing = ("src_file", "tgt_file") if cfg.src_file else ("tgt_file", "src_file")
        raise UserError(
            f"{given}= needs {missing}=: give both src_file=<path> and tgt_file=<path>, line-parallel (plain or .gz)"
        )
    for name, what in OTHER_MODES.items():
        if cfg[name] is not None:
            raise UserError(
                f"src_file= and tgt_file= align a corpus, and {name}= {what}: drop {name}= to align the files"
            )
    batch_tokens, chunk_pairs = positive(cfg, "batch_tokens"), positive(cfg, "chunk_pairs")
    if cfg.reference_aligner:  # installed? before the slow part
        reference_aligner(cfg.reference_aligner, cfg.reference_symmetrization, "reference_aligner")
    src, tgt = checked_file(cfg.src_file), checked_file(cfg.tgt_file)
    n_src, n_tgt = (sum(1 for _ in stream_lines(path)) for path in (src, tgt))
    if n_src != n_tgt:
        raise UserError(
            f"src_file={src} has {n_src} lines but tgt_file={tgt} has {n_tgt}: "
            "they must be line-parallel, one sentence pair per line"
        )
    return CorpusFiles(src, tgt, n_src, batch_tokens, chunk_pairs)


def positive(cfg: DictConfig, name: str) -> int:
    value = cfg[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name}={value!r}: give a whole number of at least 1")
    return value


def chunks(files: CorpusFiles) -> Iterator[tuple[list[str], list[str]]]:
    """The pairs chunk_pairs at a time, in order: never more of the files in memory."""
    pairs = zip_longest(stream_lines(files.src), stream_lines(files.tgt))
    while chunk := list(islice(pairs, files.chunk_pairs)):
        if any(s is None or t is None for s, t in chunk):  # counted equal, so changed since
            raise UserError(f"{files.src} or {files.tgt} changed while being aligned: run again on files at rest")
        yield [s for s, _ in chunk], [t for _, t in chunk]


@dataclass
class Skipped:
    """The pairs of one reason (qkvmt.alignment.corpus.REASONS) that got an empty line."""

    count: int = 0
    first_lines: list[int] = field(default_factory=list)  # 1-based, the first FIRST_LINES

    def add(self, line: int) -> None:
        self.count += 1
        if len(self.first_lines) < FIRST_LINES:
            self.first_lines.append(line)


def readers(
    cfg: DictConfig, model: Model, reverse_path: Path | None, chosen
) -> tuple[LayerReader, LayerReader | None, dict, dict]:
    """The forward reader, the reverse one (with `reverse_path`), what corpus.json records of
    their policies, and corpus_links' symmetrization arguments as align_both resolves them (none
    for one model): `chosen` (the one model's policy and its record, as align.policy resolves them), or with two
    models each one's own, as align_both links."""
    if reverse_path is None:
        policy, recorded = chosen
        return LayerReader(model, policy), None, {"policy": recorded}, {}
    forward, reverse = both_directions(cfg, model, reverse_path)
    method, threshold = symmetrization(cfg, forward, reverse)
    recorded = {
        "policies": {"forward": forward.policy.to_dict(), "reverse": reverse.policy.to_dict()},
        **method_of(method, threshold),
        "reverse_ckpt_path": [str(p) for p in reverse.model.paths],
    }
    two = {"symmetrization": method, "threshold": threshold}
    return LayerReader(model, forward.policy), LayerReader(reverse.model, reverse.policy), recorded, two


def align_corpus(
    cfg: DictConfig,
    model: Model,
    files: CorpusFiles,
    reverse_path: Path | None,
    chosen: tuple[AlignmentPolicy, dict] | None,
) -> dict:
    """alignment.pharaoh (one line per pair) and corpus.json in output_dir (default
    <run>/alignments/corpus_<time>), the folder staged and moved into place when complete.
    `chosen`: the one model's policy, without `reverse_path`."""
    forward, reverse, recorded, two = readers(cfg, model, reverse_path, chosen)
    skipped = {reason: Skipped() for reason in REASONS}

    def write(f) -> None:
        line = 1
        with tqdm(total=files.pairs, unit="pair", file=sys.stderr, dynamic_ncols=True) as bar:
            for sources, targets in chunks(files):
                found = corpus_links(
                    sources, targets, forward, reverse, max_tokens=files.batch_tokens, done=bar.update, **two
                )
                for links in found:
                    if isinstance(links, str):  # a reason: the pair keeps its line, empty
                        skipped[links].add(line)
                        links = set()
                    f.write((to_pharaoh(links) + "\n").encode())
                    line += 1

    start = time.perf_counter()
    staged = StagedOutput(cfg, model.paths, "corpus", kind="alignments")
    with staged as out:
        atomic_write(out / PHARAOH, write)
        seconds = time.perf_counter() - start
        summary = {
            "src_file": str(files.src),
            "tgt_file": str(files.tgt),
            "pairs": files.pairs,
            "aligned": files.pairs - sum(s.count for s in skipped.values()),
            **{reason: s.count for reason, s in skipped.items()},
            **{f"{reason}_first_lines": s.first_lines for reason, s in skipped.items() if reason != EMPTY},
            "seconds": round(seconds, 3),
            "pairs_per_second": round(files.pairs / seconds, 1) if seconds > 0 else None,
            "ckpt_path": [str(p) for p in model.paths],
            **recorded,
            "batch_tokens": files.batch_tokens,
            "chunk_pairs": files.chunk_pairs,
        }
        if cfg.reference_aligner:
            lines, summary["reference"] = reference_links(cfg, files, (model.meta.src_lang, model.meta.tgt_lang))
            write_text(out / REFERENCE, "".join(line + "\n" for line in lines))
        write_json(out / SUMMARY, summary)
    warn(skipped, model.transformer.cfg.max_positions)
    print(staged.final / PHARAOH)
    return summary | {"output_dir": str(staged.final)}


def reference_links(cfg: DictConfig, files: CorpusFiles, langs: tuple[str, str]) -> tuple[list[str], dict]:
    """The reference aligner's Pharaoh line for every pair (empty where a side is empty), and
    what corpus.json records of it: its settings and its own time, reading the files excluded."""
    aligner = reference_aligner(cfg.reference_aligner, cfg.reference_symmetrization, "reference_aligner")
    src, tgt = read_lines(files.src), read_lines(files.tgt)
    kept = [k for k, (s, t) in enumerate(zip(src, tgt)) if s.split() and t.split()]
    start = time.perf_counter()
    found = symmetrized_links(
        aligner, [src[k] for k in kept], [tgt[k] for k in kept], langs, cfg.reference_symmetrization
    )
    seconds = time.perf_counter() - start
    lines = [""] * len(src)
    for k, links in zip(kept, found):
        lines[k] = to_pharaoh(links)
    return lines, {
        "aligner": cfg.reference_aligner,
        "symmetrization": cfg.reference_symmetrization,
        "seconds": round(seconds, 3),
        "pairs_per_second": round(len(src) / seconds, 1) if seconds > 0 else None,
    }


def warn(skipped: dict[str, Skipped], max_positions: int) -> None:
    """One warning per reason a nonempty pair got an empty line, naming its first lines."""
    why = {
        TOO_LONG: f"a side longer than the model's max_positions={max_positions} allow",
        UNGROUPED: "subwords that do not group into the whitespace words",
    }
    for reason, text in why.items():
        s = skipped[reason]
        if s.count:
            lines = ", ".join(map(str, s.first_lines)) + (", ..." if s.count > len(s.first_lines) else "")
            log.warning("%d pair(s) with %s got an empty line (lines %s)", s.count, text, lines)
