"""What each encoder depth already knows, on a corpus, as a result (`Model.lens_study`: study.json,
study.md, translations.txt, as `qkvmt intervene study=lens` writes them), its table (study.md's,
the record's too) and its figure over models (docs/figures, from the record)."""

from dataclasses import dataclass
from pathlib import Path

from qkvmt.files import write_json, write_text
from qkvmt.results.figures import _figure, _save, colours
from qkvmt.results.html import escape, page
from qkvmt.results.result import Result


@dataclass
class LensStudy(Result):
    result: dict  # what study.json holds
    translations: list[list[str]]  # [depth - 1][sentence]: the translation from encoder layers 1..depth

    def markdown(self) -> str:
        return depth_table(self.result) + "\n"

    def summary(self) -> str:
        return self.markdown() + f"{self.result['n']} sentences in {self.result['wall_s']:.0f} s"

    def html(self) -> str:
        return page("What each encoder depth knows", f"<pre>{escape(self.summary())}</pre>", {"page": "text"})

    def files(self) -> dict:
        lines = "".join(f"{d + 1}\t{t}\n" for d, ts in enumerate(self.translations) for t in ts)
        return {
            "study.json": lambda path: write_json(Path(path), self.result),
            "study.md": lambda path: write_text(Path(path), self.markdown()),
            "translations.txt": lambda path: write_text(Path(path), lines),
        }


def depth_table(lens: dict) -> str:
    rows = [
        f"| 1..{r['encoder_layers']} | {r['bleu']:.2f} | {r['chrf']:.2f} | {r['chrf_vs_model']:.1f} | "
        f"{100 * r['same_as_model']:.0f}% |"
        for r in lens["depths"]
    ]
    sig = lens["signatures"]
    return "\n".join(
        [
            f"DecoderLens, {lens['n']} sentences of {lens['split']}:",
            "",
            "| the decoder reads encoder layers | BLEU | chrF | chrF against the model's own | same as the model |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"sacreBLEU `{sig['bleu']}`, chrF `{sig['chrf']}`.",
        ]
    )


def depth_plot(studies: dict[str, dict], path, title: str = "") -> None:
    """DecoderLens: chrF against the references (solid) and against the model's own translation
    (dashed) for each encoder depth the decoder reads, one colour per model (studies: {model:
    the record's `lens`})."""
    fig = _figure((6, 3.5))
    ax = fig.subplots()
    for colour, (model, lens) in zip(colours(len(studies)), studies.items()):
        depths = [r["encoder_layers"] for r in lens["depths"]]
        ax.plot(depths, [r["chrf"] for r in lens["depths"]], marker="o", color=colour, label=f"{model}, vs references")
        ax.plot(
            depths,
            [r["chrf_vs_model"] for r in lens["depths"]],
            "--",
            marker="s",
            color=colour,
            label=f"{model}, vs its own",
        )
        ax.set_xticks(depths, [f"1..{d}" for d in depths])
    ax.set_xlabel("encoder layers the decoder reads")
    ax.set_ylabel("chrF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    _save(fig, path, title)
