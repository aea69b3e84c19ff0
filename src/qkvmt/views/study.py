"""The study of keys and values as a result: what keys and values are for (`Model.study`:
study.json, study.md, sentences.jsonl), as `qkvmt intervene study=...` writes it."""

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
