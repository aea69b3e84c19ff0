"""One head's Q, K and V for one sentence pair, shown: what `Model.inspect` returns, the
inspector's page (inspect.html) and inspect.json.

The head's numbers are qkvmt.analysis.inspection's (HeadPass, computed by `inspect_head`); this
module only draws and saves them.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.analysis.inspection import HeadPass
from qkvmt.files import write_json, write_text
from qkvmt.results.html import check_labels, escape, page, texts_html, vectors_html
from qkvmt.results.result import Result


@dataclass
class HeadInspection(HeadPass, Result):
    """One head's queries, keys and values for one sentence pair, and what it made of them,
    showing itself as the inspector's page."""

    def to_dict(self) -> dict:
        """inspect.json."""
        plain = ("kind", "layer", "head", "d_k", "source", "target", "query_tokens", "key_tokens")
        return {
            **{name: getattr(self, name) for name in plain},
            **{name: getattr(self, name).tolist() for name in ("q", "k", "v")},
            "scores": [[None if np.isneginf(s) else s for s in row] for row in self.scores.tolist()],  # None: masked
            **{name: getattr(self, name).tolist() for name in ("weights", "output", "value_norms", "contributions")},
            "top_k": [[{"key": t.key, "token": t.token, "weight": t.weight} for t in row] for row in self.top_k],
            "check": self.check,
        }

    def html(self) -> str:
        """The weights map (hover: score and weight), each query's top keys, the vectors."""
        q_tokens, k_tokens = self.query_tokens, self.key_tokens
        weights, scores = np.asarray(self.weights, dtype=float), np.asarray(self.scores, dtype=float)
        check_labels(weights.shape, q_tokens, k_tokens, "weights")
        check_labels(scores.shape, q_tokens, k_tokens, "scores")
        top = "".join(
            f'<li><span class="tok">{escape(q_tokens[qi])}</span> attends to '
            + ", ".join(f'<span class="tok">{escape(t.token)}</span> ({float(t.weight):.3f})' for t in entries)
            + "</li>"
            for qi, entries in enumerate(self.top_k)
        )
        body = (
            f"<p>{escape(self.kind)} attention, layer {escape(self.layer)}, head {escape(self.head)}</p>"
            + texts_html([("source", self.source), ("target", self.target), ("d_k", self.d_k)])
            + '<h2>Weights</h2><div id="weights"></div>'
            + "<h2>What each key adds: ‖α·W_O v‖</h2><p>The weight times the norm of the key's value after the "
            'head\'s slice of W_O: a heavy weight on a small value adds little.</p><div id="contributions"></div>'
            f'<h2>Top keys per query</h2><ol class="topk" start="0">{top}</ol>'
            + vectors_html("Queries (Q)", q_tokens, self.q)
            + vectors_html("Keys (K)", k_tokens, self.k)
            + vectors_html("Values (V)", k_tokens, self.v)
            + vectors_html("Output (weights · V)", q_tokens, self.output)
        )
        data = {
            "page": "inspector",
            "query_tokens": q_tokens,
            "key_tokens": k_tokens,
            "weights": weights,
            "scores": scores,
            "contributions": self.contributions,
        }
        return page("Attention inspector", body, data)

    def files(self) -> dict:
        return {
            "inspect.json": lambda path: write_json(Path(path), self.to_dict()),
            "inspect.html": lambda path: write_text(Path(path), self.html()),
        }
