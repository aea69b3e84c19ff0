"""Word links scored against gold links (AER), as `qkvmt align gold_dir=...` writes them and
`Model.aer` returns them: one model's every extraction (aer.json; aer.png, the best's layers ×
heads), or two models' directions and symmetrizations (aer.json; alignment.pharaoh, the chosen
symmetrization's links of each pair scored)."""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkvmt.files import write_json, write_text
from qkvmt.results.figures import aer_heatmap
from qkvmt.results.html import escape, page, table_html, texts_html
from qkvmt.results.result import Result

SCORES = ("aer", "precision", "recall")


def _signal(policy: dict) -> str:
    """How a result names its signal (not at all for attention weights, as before there were
    others) and the columns it left out (none in results from before it could)."""
    signal = "" if policy["signal"] == "weights" else f"{policy['signal']}, "
    drop = policy.get("drop")
    return signal + (f"without {' and '.join(drop)}, " if drop else "")


def _scores(s: dict) -> str:
    return f"AER {s['aer']:.3f}, precision {s['precision']:.3f}, recall {s['recall']:.3f}"


@dataclass
class AERReport(Result):
    scores: dict  # what aer.json holds
    grid: np.ndarray | None = None  # one model: AER by layer (rows) and head (columns) of the best's reading
    heads: list[str] = field(default_factory=list)  # the grid's columns: "head 0", ..., "mean"
    pharaoh: list[str] | None = None  # two models: the chosen symmetrization's links, one line per pair scored

    @property
    def two_models(self) -> bool:
        return "by_method" in self.scores

    def summary(self) -> str:
        """What the command prints: the best reading's scores, and the default's (one model) or each
        direction's and the chosen symmetrization's (two models), one line each."""
        return "\n".join(self._two_model_lines() if self.two_models else self._one_model_lines())

    def _one_model_lines(self) -> list[str]:
        r = self.scores
        best, default, reference = r["best"], r["default"], r["reference"]
        head_name = "the head average" if best["head"] == "mean" else f"head {best['head']}"
        chosen = (
            f", chosen on the first {r['dev']['first_pairs']} pairs (AER {best['dev_aer']:.3f} there)"
            if r["dev"]
            else ""
        )
        what = "the supervised head" if default["supervised"] else "the layer's head average"
        lines = [
            f"best: layer {best['layer']} {head_name} ({_signal(best)}{best['rows']} rows, {best['direction']}): "
            f"{_scores(best)} over {r['n']} pairs{chosen}",
            f"default: layer {default['layer']} {what} ({default['rows']} rows, {default['direction']}): "
            f"{_scores(default)}",
        ]
        if reference:
            lines.append(f"reference: {reference['aligner']} ({reference['symmetrization']}): {_scores(reference)}")
        return lines

    def _two_model_lines(self) -> list[str]:
        r, table = self.scores, self.scores["by_method"]
        dev = r["dev"]
        chosen = r["symmetrize"] + (f"@{r['symmetrize_threshold']:g}" if "symmetrize_threshold" in r else "")
        best = r["best"]["reading"]
        pairs = r["n"] + (dev["n"] if dev else 0) + r["skipped_too_long"]  # the gold set's
        over = f"over {r['n']} pairs" + (f" (pairs {dev['first_pairs'] + 1}-{pairs})" if dev else "")
        lines = []
        for name in dict.fromkeys(("forward", "reverse", chosen, best)):
            t = table[name]
            lines.append(
                f"{'best: ' if name == best else ''}{name}: {_scores(t)} {over}"
                + (
                    f", chosen on the first {dev['first_pairs']} pairs (AER {t['dev_aer']:.3f} there)"
                    if name == best and dev
                    else ""
                )
            )
        return lines

    def title(self) -> str:
        best = self.scores["best"]
        return f"AER ({_signal(best)}{best['rows']} rows, {best['direction']})"

    def html(self) -> str:
        texts = [("gold links", self.scores["gold_dir"]), ("pairs scored", self.scores["n"])]
        body = texts_html(texts + [(f"{i + 1}", line) for i, line in enumerate(self.summary().splitlines())])
        if self.two_models:
            rows = [[name] + [f"{t[k]:.3f}" for k in SCORES] for name, t in self.scores["by_method"].items()]
            body += "<h2>Every reading</h2>" + table_html(["reading", *SCORES], rows)
        elif self.grid is not None:
            rows = [[f"layer {i}"] + [f"{x:.3f}" for x in row] for i, row in enumerate(self.grid)]
            body += f"<h2>{escape(self.title())}</h2>" + table_html(["", *self.heads], rows)
        return page("Alignment error rate", body, {"page": "text"})

    def files(self) -> dict:
        files = {"aer.json": lambda path: write_json(Path(path), self.scores)}
        if self.grid is not None:
            files["aer.png"] = lambda path: aer_heatmap(self.grid, self.heads, path, title=self.title())
        if self.pharaoh is not None:
            files["alignment.pharaoh"] = lambda path: write_text(Path(path), "".join(p + "\n" for p in self.pharaoh))
        return files
