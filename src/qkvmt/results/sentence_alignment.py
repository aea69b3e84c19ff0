"""One sentence's word alignment from cross-attention: what align.py prints and writes
(alignment.json, alignment.png, alignment.html), and what `Model.align` returns."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.alignment.links import Link, to_pharaoh
from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.analysis.forced import AttentionMap, ForcedPass
from qkvmt.files import write_json, write_text
from qkvmt.results.figures import heatmap_grid
from qkvmt.results.html import check_labels, page, texts_html, viewer_maps
from qkvmt.results.result import Result


@dataclass
class SentenceAlignment(Result):
    source: str
    translation: str  # the target: the model's translation, or the given reference
    forced: bool  # True: the target was given (reference=), not translated
    src_tokens: list[str]  # the columns of `cross`
    tgt_tokens: list[str]  # the rows of `cross`: row t predicts tgt_tokens[t]
    src_words: list[str]
    tgt_words: list[str]
    src_word_groups: list[list[int]]  # each word's positions in src_tokens
    tgt_word_groups: list[list[int]]
    cross: np.ndarray  # (layers, heads, target tokens, source tokens)
    full_context_layer: int | None  # that layer's weights come from a pass without the causal mask
    policy: dict  # the AlignmentPolicy's fields (and, for head=best, the AER result it came from)
    word_matrix: np.ndarray  # (target words, source words): the policy's head, reduced to words
    links: list[Link]  # (source word, target word), 0-based, sorted
    signal_map: AttentionMap | None = None  # the cross map of the policy's signal, if it is not the weights

    @classmethod
    def of(cls, attention: ForcedPass, policy: AlignmentPolicy) -> "SentenceAlignment":
        """The alignment `policy` reads from a forced pass, as alignments read it (a full-context
        layer without the causal mask: ForcedPass.for_alignment)."""
        read = attention.for_alignment
        cross = read.map("cross")  # rows: the target tokens they predict; columns: the source tokens
        wa = policy.align_words(attention)
        return cls(
            source=attention.source,
            translation=attention.target,
            forced=attention.forced,
            src_tokens=cross.cols,
            tgt_tokens=cross.rows,
            src_words=wa.src_words,
            tgt_words=wa.tgt_words,
            src_word_groups=wa.src_groups,
            tgt_word_groups=wa.tgt_groups,
            cross=cross.weights,
            full_context_layer=attention.full_context_layer,
            policy=policy.to_dict(),
            word_matrix=wa.matrix,
            links=list(wa.links),
            signal_map=None if policy.signal == "weights" else read.map("cross", policy.signal),
        )

    @property
    def pharaoh(self) -> str:
        """The links as a Pharaoh line: `i-j`, 0-based source word i, target word j."""
        return to_pharaoh(self.links)

    def to_dict(self) -> dict:
        """alignment.json."""
        plain = ("source", "translation", "forced", "src_tokens", "tgt_tokens", "src_words", "tgt_words")
        return {
            **{name: getattr(self, name) for name in (*plain, "src_word_groups", "tgt_word_groups")},
            "cross": self.cross.round(6).tolist(),  # [layer][head][target][source]
            "full_context_layer": self.full_context_layer,
            "policy": self.policy,
            "word_matrix": self.word_matrix.round(6).tolist(),
            "links": [list(p) for p in self.links],
            "pharaoh": self.pharaoh,
            **self.signal_lists(),
        }

    def signal_lists(self) -> dict:
        """What the policy read, if not the weights: cross_<signal> [layer][head][target][source]
        where the signal has per-head maps, and cross_<signal>_layers [layer][target][source]."""
        m = self.signal_map
        if m is None:
            return {}
        heads = {} if m.weights is None else {f"cross_{m.signal}": m.weights.round(6).tolist()}
        return heads | {f"cross_{m.signal}_layers": m.layers.round(6).tolist()}

    def html(self) -> str:
        """The word matrix with its hard links, then the subword maps (the numbers of alignment.json)."""
        d = self.to_dict()
        cross = AttentionMap("cross", np.asarray(d["cross"], dtype=float), self.tgt_tokens, self.src_tokens)
        words = np.asarray(d["word_matrix"], dtype=float)
        check_labels(words.shape, self.tgt_words, self.src_words, "word_matrix")
        shown_policy = ", ".join(f"{k} {v}" for k, v in self.policy.items())
        body = (
            texts_html(
                [
                    ("source", self.source),
                    ("translation", self.translation),
                    ("policy", shown_policy),
                    ("Pharaoh", self.pharaoh),
                ]
            )
            + "<h2>Word alignment</h2><p>Rows are target words, columns source words; "
            'a dot marks a link.</p><div id="words"></div>'
            + '<h2>Subword cross attention</h2><div id="subwords"></div>'
        )
        signals = {} if self.signal_map is None else {self.signal_map.signal: [self.signal_map]}
        data = {
            "page": "alignment",
            "attention": viewer_maps([cross], signals),
            "word_matrix": words,
            "links": d["links"],
            "src_words": self.src_words,
            "tgt_words": self.tgt_words,
            "policy": self.policy,
        }
        return page("Alignment", body, data)

    def files(self) -> dict:
        return {
            "alignment.json": lambda path: write_json(Path(path), self.to_dict()),
            "alignment.png": lambda path: heatmap_grid(
                self.cross, self.tgt_tokens, self.src_tokens, path, title="cross-attention"
            ),
            "alignment.html": lambda path: write_text(Path(path), self.html()),
        }
