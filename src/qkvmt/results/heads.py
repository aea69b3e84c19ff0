"""What heads.py finds, as a result: every head's effect when masked, what it looks at, and the
pruning curve; written as heads.json, heads.html (heat maps per kind, a sortable table, the
curve) and pruning.png."""

from dataclasses import asdict, dataclass, field
from pathlib import Path

from qkvmt.files import write_json, write_text
from qkvmt.results.figures import curve_plot
from qkvmt.results.html import page, texts_html
from qkvmt.results.result import Result

# The table's columns: (key of a head's row, heading)
COLUMNS = [
    ("kind", "kind"),
    ("layer", "layer"),
    ("head", "head"),
    ("bleu_drop", "BLEU lost"),
    ("chrf_drop", "chrF lost"),
    ("aer_rise", "AER gained"),
    ("entropy", "entropy"),
    ("eos_share", "on </s>"),
    ("punctuation_share", "on punctuation"),
    ("offset", "offset"),
    ("offset_share", "at offset"),
]


@dataclass
class HeadsReport(Result):
    source: str  # the split or file decoded
    n: int  # sentences
    decode: dict  # the decoding settings
    bleu: float  # unmasked
    chrf: float
    aer: float | None  # unmasked, of the default alignment policy on gold_dir, if given
    signatures: dict
    heads: list[dict]  # one row per head: COLUMNS' keys, bleu and chrf masked, aer masked
    pruning: list[dict] = field(default_factory=list)  # {removed, bleu, chrf, last}: the curve
    checkpoints: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def section(self) -> str:
        """The heads' heat maps, table and curve (escaped HTML), as heads.html and report.html show them."""
        scores = f"BLEU {self.bleu:.2f} · chrF {self.chrf:.2f}" + ("" if self.aer is None else f" · AER {self.aer:.3f}")
        return (
            texts_html(
                [
                    ("decoded", f"{self.source}, {self.n} sentences"),
                    ("unmasked", scores),
                    ("signature", self.signatures.get("bleu", "")),
                    ("checkpoints", ", ".join(self.checkpoints)),
                ]
            )
            + "<h3>BLEU lost when one head is masked</h3><p>Layers × heads of each kind; hover for the numbers.</p>"
            + '<div id="heads-grids"></div><h3>Every head</h3><p>Click a heading to sort. Offset: the relative '
            "position a self-attention head's heaviest key most often has (−1 the previous token); at or above "
            "0.9, Voita et al. call the head positional.</p>"
            + '<div id="heads-table"></div>'
            + (
                "<h3>Pruning</h3><p>BLEU with the least important heads masked together, least first.</p>"
                '<div id="heads-curve"></div>'
                if self.pruning
                else ""
            )
        )

    def summary(self) -> str:
        """What the command prints first: the unmasked scores, and the five heads whose masking loses most BLEU."""
        top = sorted(self.heads, key=lambda r: -r["bleu_drop"])[:5]
        lines = [f"unmasked: BLEU {self.bleu:.2f}, chrF {self.chrf:.2f} ({self.signatures['bleu']})"]
        lines += [
            f"  {r['kind']:>7} layer {r['layer']} head {r['head']}: BLEU -{r['bleu_drop']:.2f} when masked" for r in top
        ]
        return "\n".join(lines)

    def data(self) -> dict:
        """What the page's script draws the section from."""
        return {"heads": self.heads, "columns": COLUMNS, "pruning": self.pruning}

    def html(self) -> str:
        return page(
            f"Heads of {self.source}", "<h2>Heads</h2>" + self.section(), {"page": "heads", "heads": self.data()}
        )

    def files(self) -> dict:
        files = {
            "heads.json": lambda path: write_json(Path(path), self.to_dict()),
            "heads.html": lambda path: write_text(Path(path), self.html()),
        }
        if self.pruning:
            files["pruning.png"] = lambda path: curve_plot(
                self.pruning,
                path,
                "pruning heads",
                x="removed",
                xlabel="heads masked (least important first)",
                prefix="",
            )
        return files
