"""A checkpoint scored on a test set, as `qkvmt evaluate` writes it and `Model.evaluate` returns
it: hypotheses.txt, metrics.json (BLEU and chrF with their signatures, the decoding, the
checkpoints, and sacreBLEU's paired tests against a baseline where one was given),
sentences.jsonl (every sentence's own BLEU and chrF), and for the first sentences their attention
(attention/<i>_<kind>.png, every layer and head; attention.npz, the raw weights) in report.html,
beside the run's validation curve (curve.png) and what `qkvmt heads` found for the checkpoint."""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkvmt.files import atomic_write, write_json, write_text
from qkvmt.results.figures import curve_plot, heatmap_grid
from qkvmt.results.heads import HeadsReport
from qkvmt.results.report import ReportSample, attention_report, report_page
from qkvmt.results.result import Result
from qkvmt.results.translations import Translations

SCORES = ("bleu", "chrf", "bleu_lc", "bleu_tok_lc")


@dataclass
class Samples:
    """The sentences report.html shows: their positions in the test set, their report samples, the
    raw arrays attention.npz holds, and the signatures of their own scores."""

    picked: list[int]
    samples: list[ReportSample]
    arrays: dict[str, np.ndarray]
    signatures: dict


@dataclass
class Evaluation(Result):
    translations: Translations
    metrics: dict  # what metrics.json holds
    sampled: Callable[[], Samples]  # the report's sentences, computed when first asked for (forced passes)
    policy: dict  # the alignment policy the report draws links by
    curve: list[dict] = field(default_factory=list)  # the run's validation curve
    heads: HeadsReport | None = None  # what `qkvmt heads` found for the checkpoint
    per_sentence: list[dict] = field(default_factory=list)  # every sentence's own BLEU and chrF
    baseline: list[dict] | None = None  # the same of the baseline compared with, if one was
    _samples: Samples | None = field(default=None, init=False, repr=False)

    def samples(self) -> Samples:
        if self._samples is None:
            self._samples = self.sampled()
        return self._samples

    def summary(self) -> str:
        """Each score with its signature, one line each, and the speed."""
        m = self.metrics
        lines = [f"{key:12s} {m[key]:6.2f}  {m['signatures'][key]}" for key in SCORES if key in m]
        lines += significance_lines(m["significance"]) if "significance" in m else []
        return "\n".join(lines + [f"{m['n']} sentences, {m['sent_per_s']:.1f} sent/s"])

    def sentence_lines(self) -> str:
        """sentences.jsonl: each sentence's BLEU and chrF (and the baseline's), by its 0-based line."""
        rows = []
        for i, own in enumerate(self.per_sentence):
            base = {} if self.baseline is None else {f"baseline_{k}": v for k, v in self.baseline[i].items()}
            rows.append(json.dumps({"line": i, **own, **base}) + "\n")
        return "".join(rows)

    def html(self) -> str:
        s = self.samples()
        return report_page(self.metrics, s.samples, self.curve, s.signatures, self.policy, self.heads)

    def files(self) -> dict:
        s = self.samples()
        files = {
            "hypotheses.txt": lambda path: write_text(Path(path), "".join(h + "\n" for h in self.translations)),
            "metrics.json": lambda path: write_json(Path(path), self.metrics),
            "sentences.jsonl": lambda path: write_text(Path(path), self.sentence_lines()),
        }
        for i, sample in zip(s.picked, s.samples):
            for m in sample.maps:
                files[f"attention/{i:04d}_{m.kind}.png"] = lambda path, i=i, m=m: drawn(m, i, Path(path))
        files["attention.npz"] = lambda path: atomic_write(Path(path), lambda f: np.savez_compressed(f, **s.arrays))
        page = (self.metrics, s.samples, self.curve, s.signatures, self.policy, self.heads)
        files["report.html"] = lambda path: attention_report(path, *page)
        if self.curve:
            files["curve.png"] = lambda path: curve_plot(self.curve, path, title="validation during training")
        return files


def drawn(m, i: int, path: Path) -> None:
    """One sentence's maps of one kind, every layer and head."""
    path.parent.mkdir(exist_ok=True)
    heatmap_grid(m.weights, m.rows, m.cols, path, title=f"sentence {i + 1}: {m.label} attention")


def significance_lines(tested: dict) -> list[str]:
    """Each score against the baseline's, with each test's p-value and the bootstrap's intervals."""
    lines = [f"against {tested['baseline']} (seed {tested['seed']}):"]
    names = {"bs": "paired bootstrap", "ar": "approximate randomization"}
    for key in ("bleu", "chrf"):
        first = next(tested[t][key] for t in names if t in tested)
        line = f"  {key:5s} {first['system']:6.2f} vs {first['baseline']:6.2f}"
        for test, name in names.items():
            if test in tested:
                r = tested[test][key]
                interval = f", ±{r['system_ci']:.2f} vs ±{r['baseline_ci']:.2f} (95%)" if "system_ci" in r else ""
                line += f"; {name} p = {r['p_value']:.4f}{interval}"
        lines.append(line)
    return lines
