"""Every signal's faithfulness, as `qkvmt faithfulness` writes it and `Model.faithfulness` returns
it: faithfulness.json (the result), faithfulness.md (the table: each reading's deletion AOPC,
reversed AOPC and sufficiency, with its AER where a leaderboard was given) and faithfulness.png."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.files import atomic_write, write_json, write_text
from qkvmt.results.figures import _figure
from qkvmt.results.html import escape, page
from qkvmt.results.result import Result, timed

INTERVAL = "95% interval over sentences, normal approximation: mean ± 1.96·s/√n"
FORCED = {"reference": "the references forced", "own": "its own translations forced"}  # by `target`


def _mean_ci(m: dict) -> str:
    return f"{m['mean']:.3f}" + (f" [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]" if m["ci95"] else "")


@dataclass
class Faithfulness(Result):
    result: dict  # what faithfulness.json holds

    def markdown(self) -> str:
        """The table: each reading's AOPCs and sufficiency (nats of log p lost), and its AER where a
        leaderboard was given."""
        result = self.result
        with_aer = result["aer_file"] is not None
        head = "| reading | deletion AOPC ↑ | reversed AOPC | sufficiency ↓ |" + (
            " AER (rows, direction) |" if with_aer else ""
        )
        lines = [
            f"Faithfulness of {result['model']} on {result['split']}, {FORCED[result.get('target', 'reference')]}: "
            f"{result['n']} sentences, "
            f"{result['targets_per_sentence']} target tokens each, levels {result['levels']}; "
            f"drops of log p in nats, {INTERVAL}.",
            "",
            head,
            "|---" * (head.count("|") - 1) + "|",
        ]
        for r in result["readings"]:
            aer = r["aer"]
            cell = (
                (f" {aer['aer']:.3f} ({aer['rows']}, {aer['direction']}) |" if aer else " not in the leaderboard |")
                if with_aer
                else ""
            )
            lines.append(
                f"| {r['label']} | {_mean_ci(r['deletion_aopc'])} | {_mean_ci(r['reversed_aopc'])} | "
                f"{_mean_ci(r['sufficiency'])} |{cell}"
            )
        lines += [
            "",
            f"Random order ({result['random_draws']} draws a sentence): "
            f"deletion AOPC {_mean_ci(result['random_aopc'])}.",
        ]
        if not with_aer:
            lines.append("AER: give aer_file=<aer.json of qkvmt align gold_dir=<dir> leaderboard=true> for this model.")
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        """The table, and how long it took."""
        return self.markdown() + timed(self.result)

    def plot(self, path: Path) -> None:
        """Deletion AOPC with its interval per reading (reversed as a hollow mark), random as a line."""
        result, rows = self.result, self.result["readings"]
        fig = _figure((7, 1.5 + 0.32 * len(rows)))
        ax = fig.subplots()
        y = np.arange(len(rows))[::-1]
        for key, style in (
            ("deletion_aopc", {"fmt": "o", "color": "C0", "label": "deletion AOPC"}),
            ("reversed_aopc", {"fmt": "o", "color": "C7", "mfc": "none", "label": "reversed"}),
        ):
            means = np.array([r[key]["mean"] for r in rows])
            ci = np.array([r[key]["ci95"] or [r[key]["mean"]] * 2 for r in rows])
            ax.errorbar(means, y, xerr=np.abs(ci.T - means), capsize=3, **style)
        random = result["random_aopc"]
        ax.axvline(random["mean"], color="C3", linestyle="--", label="random order")
        if random["ci95"]:
            ax.axvspan(*random["ci95"], color="C3", alpha=0.15)
        ax.set_yticks(y, [r["label"] for r in rows], fontsize=8)
        ax.set_xlabel("drop of log p, mean over levels (nats)")
        ax.grid(axis="x", alpha=0.3)
        fig.legend(fontsize=8, loc="outside lower center", ncols=3)  # below the axes: no reading hidden
        fig.suptitle(f"Faithfulness: {result['model']}, {result['split']}, {result['n']} sentences", fontsize=10)
        atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100))

    def html(self) -> str:
        return page("Faithfulness", f"<pre>{escape(self.summary())}</pre>", {"page": "text"})

    def files(self) -> dict:
        return {
            "faithfulness.json": lambda path: write_json(Path(path), self.result),
            "faithfulness.md": lambda path: write_text(Path(path), self.markdown()),
            "faithfulness.png": lambda path: self.plot(Path(path)),
        }
