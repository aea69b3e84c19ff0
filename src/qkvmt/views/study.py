"""The corpus studies as results: what keys and values are for (`Model.study`: study.json,
study.md, sentences.jsonl) and what each encoder depth already knows (`Model.lens_study`:
study.json, study.md, translations.txt), as `qkvmt intervene study=...` writes them."""

import json
from dataclasses import dataclass
from pathlib import Path

from qkvmt.files import write_json, write_text
from qkvmt.views.html import escape, page
from qkvmt.views.kv_study import markdown
from qkvmt.views.result import Result, timed


@dataclass
class KeyValueStudy(Result):
    result: dict  # what study.json holds
    sentences: list[dict]  # per sentence: its line, source, translation, and what each study did to it

    def markdown(self) -> str:
        return markdown(self.result)

    def summary(self) -> str:
        """study.md, and how long each study took."""
        return self.markdown() + timed(self.result)

    def html(self) -> str:
        return page("Keys and values", f"<pre>{escape(self.summary())}</pre>", {"page": "text"})

    def files(self) -> dict:
        lines = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in self.sentences)
        return {
            "study.json": lambda path: write_json(Path(path), self.result),
            "study.md": lambda path: write_text(Path(path), self.markdown()),
            "sentences.jsonl": lambda path: write_text(Path(path), lines),
        }


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
