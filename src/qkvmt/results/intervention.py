"""What `Model.intervene` returns: an edit's effect on one sentence, shown and saved
(intervention.html, intervention.json).

The numbers are qkvmt.analysis.intervention's (InterventionPass); this module only draws and
saves them: both translations with the changed words marked, each original token's
log-probability before and after, and every cross-attention layer's map (the heads' average)
over the original translation, before and after the edit.
"""

from dataclasses import asdict
from pathlib import Path

import numpy as np

from qkvmt.analysis.intervention import InterventionPass
from qkvmt.files import write_json, write_text
from qkvmt.results.html import check_labels, escape, page, texts_html
from qkvmt.results.result import Result


def describe(edit) -> dict:
    """An edit as JSON: its type and fields."""
    return {"edit": type(edit).__name__, **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(edit).items()}}


def marked(text: str, changed: list[bool]) -> str:
    return " ".join(f"<mark>{escape(w)}</mark>" if c else escape(w) for w, c in zip(text.split(), changed))


class Intervention(InterventionPass, Result):
    """One sentence's translation before and after edits of its attention, showing itself as a page."""

    def to_dict(self) -> dict:
        """intervention.json."""
        return {
            "source": self.source,
            "edits": [describe(e) for e in self.edits],
            "original": self.original,
            "edited": self.edited,
            "changed_words": [w for w, c in zip(self.edited.split(), self.changed) if c],
            "src_tokens": self.src_tokens,
            "original_tokens": self.original_tokens,
            "edited_tokens": self.edited_tokens,
            "log_prob": self.log_prob.tolist(),
            "log_prob_edited": self.log_prob_edited.tolist(),
            "cross_before": self.cross_before.tolist(),
            "cross_after": self.cross_after.tolist(),
        }

    def html(self) -> str:
        before, after = self.cross_before.mean(axis=1), self.cross_after.mean(axis=1)  # (L, T, S)
        for maps in (before, after):
            check_labels(maps.shape[1:], self.original_tokens, self.src_tokens, "cross-attention")
        edits = "; ".join(", ".join(f"{k} {v}" for k, v in describe(e).items() if v is not None) for e in self.edits)
        rows = "".join(
            f"<tr><td>{escape(t)}</td><td>{a:.3f}</td><td>{b:.3f}</td><td>{b - a:+.3f}</td></tr>"
            for t, a, b in zip(self.original_tokens, self.log_prob, self.log_prob_edited)
        )
        body = (
            texts_html([("source", self.source), ("edits", edits or "none")])
            + '<dl class="texts"><dt>original</dt><dd id="original">'
            + escape(self.original)
            + '</dd><dt>edited</dt><dd id="edited">'
            + marked(self.edited, self.changed)
            + "</dd></dl>"
            + f"<p>Log-probability of the original translation: {self.log_prob.sum():.3f} without the edit, "
            f"{self.log_prob_edited.sum():.3f} with it ({self.log_prob_change.sum():+.3f}).</p>"
            + '<h2>Each original token</h2><table class="plain num"><tr><th>token</th><th>log p</th>'
            + f"<th>log p, edited</th><th>change</th></tr>{rows}</table>"
            + "<h2>Cross-attention over the original translation, each layer (heads averaged)</h2>"
            + '<div id="maps"></div>'
        )
        data = {"page": "intervention", "rows": self.original_tokens, "cols": self.src_tokens}
        data |= {"before": np.asarray(before), "after": np.asarray(after)}
        return page("Intervention", body, data)

    def files(self) -> dict:
        return {
            "intervention.json": lambda path: write_json(Path(path), self.to_dict()),
            "intervention.html": lambda path: write_text(Path(path), self.html()),
        }
