"""The word links of a corpus, one Pharaoh line per sentence pair (as fast_align, eflomal and
awesome-align write them), aligned as they are read: what `qkvmt align src_file= tgt_file=`
writes (alignment.pharaoh, corpus.json, and with a reference aligner reference.pharaoh) and
`Model.align_corpus` returns.

Line i is always pair i: a pair with an empty side, with a side longer than the model's
positions, or whose subwords do not group into its whitespace words gets an empty line, and the
summary counts each kind and names the first lines of the last two."""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from qkvmt.alignment.corpus import EMPTY, REASONS, TOO_LONG, UNGROUPED
from qkvmt.alignment.links import Link, to_pharaoh
from qkvmt.errors import UserError
from qkvmt.files import atomic_write, write_json, write_text
from qkvmt.results.html import page, texts_html
from qkvmt.results.result import Result

FIRST_LINES = 10  # the line numbers of skipped pairs a summary and a warning name


@dataclass
class Skipped:
    """The pairs of one reason (qkvmt.alignment.corpus.REASONS) that got an empty line."""

    count: int = 0
    first_lines: list[int] = field(default_factory=list)  # 1-based, the first FIRST_LINES

    def add(self, line: int) -> None:
        self.count += 1
        if len(self.first_lines) < FIRST_LINES:
            self.first_lines.append(line)


class CorpusAlignment(Result):
    """Iterating gives each pair's Pharaoh line, in order, as it is aligned, once: a corpus is never
    held in memory. `save(folder)` writes the lines and the summary; `summary()` once they are read."""

    def __init__(
        self,
        links: Iterator[set[Link] | str],
        settings: dict,
        max_positions: int,
        reference: Callable[[], tuple[list[str], dict]] | None = None,
    ):
        self._links = links  # each pair's links, or the reason it has none
        self.inputs: dict = {}  # what the pairs were read from (the command's files), first in the summary
        self.settings = settings  # how the links were read: checkpoints, policies, batch sizes
        self.max_positions = max_positions
        self._reference, self._referenced = reference, None  # the reference aligner's lines and record, once read
        self.skipped = {reason: Skipped() for reason in REASONS}
        self.pairs, self.seconds = 0, None

    def __iter__(self) -> Iterator[str]:
        if self._links is None:
            raise UserError("a corpus alignment's lines are read once: align the corpus again to read them again")
        links, self._links = self._links, None
        start = time.perf_counter()
        for found in links:
            self.pairs += 1
            if isinstance(found, str):  # a reason: the pair keeps its line, empty
                self.skipped[found].add(self.pairs)
                found = set()
            yield to_pharaoh(found)
        self.seconds = time.perf_counter() - start

    def reference(self) -> tuple[list[str], dict] | None:
        """The reference aligner's line for every pair and what the summary records of it (None without one)."""
        if self._reference is not None and self._referenced is None:
            self._referenced = self._reference()
        return self._referenced

    def summary(self) -> dict:
        """What corpus.json holds: the pairs, those skipped by reason, the time, the settings."""
        if self.seconds is None:
            raise UserError("the corpus is not aligned yet: read its lines (iterate the result) or save it first")
        skipped = self.skipped
        summary = {
            **self.inputs,
            "pairs": self.pairs,
            "aligned": self.pairs - sum(s.count for s in skipped.values()),
            **{reason: s.count for reason, s in skipped.items()},
            **{f"{reason}_first_lines": s.first_lines for reason, s in skipped.items() if reason != EMPTY},
            "seconds": round(self.seconds, 3),
            "pairs_per_second": round(self.pairs / self.seconds, 1) if self.seconds > 0 else None,
            **self.settings,
        }
        return summary | ({"reference": self.reference()[1]} if self._reference else {})

    def warnings(self) -> list[str]:
        """One line per reason a nonempty pair got an empty line, naming its first lines."""
        why = {
            TOO_LONG: f"a side longer than the model's max_positions={self.max_positions} allow",
            UNGROUPED: "subwords that do not group into the whitespace words",
        }
        out = []
        for reason, text in why.items():
            s = self.skipped[reason]
            if s.count:
                lines = ", ".join(map(str, s.first_lines)) + (", ..." if s.count > len(s.first_lines) else "")
                out.append(f"{s.count} pair(s) with {text} got an empty line (lines {lines})")
        return out

    def html(self) -> str:
        if self.seconds is None:
            body = texts_html([("not aligned yet", "iterate the result for its lines, or save it to a folder")])
        else:
            body = texts_html([(k, v) for k, v in self.summary().items()] + [("", w) for w in self.warnings()])
        return page("Corpus alignment", body, {"page": "text"})

    def files(self) -> dict:
        def pharaoh(f) -> None:
            for line in self:
                f.write((line + "\n").encode())

        files = {"alignment.pharaoh": lambda path: atomic_write(Path(path), pharaoh)}
        if self._reference is not None:
            files["reference.pharaoh"] = lambda path: write_text(
                Path(path), "".join(line + "\n" for line in self.reference()[0])
            )
        return files | {"corpus.json": lambda path: write_json(Path(path), self.summary())}
