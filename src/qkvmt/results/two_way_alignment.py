"""One sentence linked by two models, one for each direction, and symmetrized: what `qkvmt align
reverse_ckpt_path=...` writes (alignment.json) and `Model.align_both` returns."""

from dataclasses import asdict, dataclass
from pathlib import Path

from qkvmt.alignment.links import Link
from qkvmt.files import write_json
from qkvmt.results.html import page, table_html, texts_html
from qkvmt.results.result import Result


@dataclass
class TwoWayAlignment(Result):
    source: str
    translation: str  # the forward model's translation, or the given reference
    forced: bool  # True: the target was given, not translated
    src_words: list[str]
    tgt_words: list[str]
    policies: dict  # {"forward": ..., "reverse": ...}: each model's AlignmentPolicy fields
    reverse_ckpt_path: list[str]
    symmetrize: str  # how the two models' links combine
    symmetrize_threshold: float | None  # a soft method's; None for the others, and not recorded
    forward_links: list[Link]
    reverse_links: list[Link]  # as (source word, target word), like the others
    links: list[Link]  # symmetrized
    pharaoh: str

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.symmetrize_threshold is None:
            del data["symmetrize_threshold"]
        return data

    def grid(self) -> list[list[str]]:
        """One row per source word, one cell per target word: F forward, R reverse, ■ symmetrized."""
        marks = {"F": set(self.forward_links), "R": set(self.reverse_links), "■": set(self.links)}
        return [
            [s] + ["".join(m for m, links in marks.items() if (i, j) in links) for j in range(len(self.tgt_words))]
            for i, s in enumerate(self.src_words)
        ]

    def html(self) -> str:
        method = self.symmetrize + ("" if self.symmetrize_threshold is None else f" at {self.symmetrize_threshold:g}")
        texts = [("source", self.source), ("translation", self.translation), ("symmetrized", method)]
        body = texts_html([*texts, ("links", self.pharaoh)]) + table_html(["", *self.tgt_words], self.grid())
        return page("Alignment by two models", body, {"page": "text"})

    def files(self) -> dict:
        return {"alignment.json": lambda path: write_json(Path(path), self.to_dict())}
