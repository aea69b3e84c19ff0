"""One sentence's forced pass, shown: what `Model.attention` returns, a page of every kind,
signal, layer and head (attention.html), a PNG of each kind's weights and attention.npz.

The pass and its typed maps are qkvmt.analysis.forced's (ForcedPass, AttentionMap); this module
only draws and saves them.
"""

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from qkvmt.alignment.links import group_words, word_groups
from qkvmt.analysis.forced import KINDS, ForcedPass
from qkvmt.files import atomic_write, write_text
from qkvmt.results.figures import heatmap_grid
from qkvmt.results.report import ReportSample, samples_page
from qkvmt.results.result import Result


@dataclass
class SentenceAttention(ForcedPass, Result):
    """Every layer and head of every kind of attention of one forced (source, target) pass, by
    every signal it was computed with (`signals`; `map(kind, signal)`)."""

    @classmethod
    def of(cls, forced: ForcedPass) -> "SentenceAttention":
        return cls(**{f.name: getattr(forced, f.name) for f in fields(forced)})

    @property
    def src_groups(self) -> list[list[int]]:
        """The positions in src_tokens of each whitespace word of the source."""
        return word_groups(self.src_tokens)

    @property
    def tgt_groups(self) -> list[list[int]]:
        """The positions in out_tokens (the rows of decoder and cross maps) of each target word."""
        return word_groups(self.out_tokens)

    @property
    def src_words(self) -> list[str]:
        return group_words(self.src_tokens, self.src_groups)

    @property
    def tgt_words(self) -> list[str]:
        return group_words(self.out_tokens, self.tgt_groups)

    def html(self) -> str:
        sample = ReportSample(
            self.source,
            self.target,
            self.maps(),
            target_label="target" if self.forced else "translation",
            signals={s: self.maps(s) for s in self.signals[1:]},
            token_scores=self.token_scores,
            source_share=None if self.contributions is None else self.contributions.source_share,
        )
        return samples_page("Attention", [sample])

    def arrays(self) -> dict[str, np.ndarray]:
        """What attention.npz holds: the weights of each kind (`cross`: layers × heads × rows ×
        columns); of every other signal, each kind's maps per head, where it has them
        (`cross_value_norms`), and per layer (`cross_value_norms_layer`); and the three token rows."""
        others = {}
        for signal in self.signals[1:]:
            for m in self.maps(signal):
                if m.weights is not None:
                    others[f"{m.kind}_{signal}"] = m.weights
                others[f"{m.kind}_{signal}_layer"] = m.layers
        return {
            **{kind: getattr(self, kind) for kind in KINDS},
            **others,
            **{f"{side}_tokens": np.array(getattr(self, f"{side}_tokens")) for side in ("src", "tgt", "out")},
        }

    def files(self) -> dict:
        pngs = {
            f"{m.kind}.png": (
                lambda path, m=m: heatmap_grid(m.weights, m.rows, m.cols, path, title=f"{m.label} attention")
            )
            for m in self.maps()
        }
        return {
            "attention.npz": lambda path: atomic_write(Path(path), lambda f: np.savez_compressed(f, **self.arrays())),
            **pngs,
            "attention.html": lambda path: write_text(Path(path), self.html()),
        }
