"""What `translate` returns: the translations, in input order, as a list of strings that also
keeps its sources, the subwords generated and the decoding settings, shows itself as a table
and saves itself as translate.py's output (one line each)."""

from pathlib import Path

from qkvmt.files import write_json, write_text
from qkvmt.results.html import page, texts_html
from qkvmt.results.result import Result


class Translations(list, Result):
    def __init__(
        self,
        translations: list[str],
        sources: list[str],
        ids: list[list[int]] | None = None,
        settings: dict | None = None,
        engine: str | None = None,
    ):
        super().__init__(translations)
        self.sources = list(sources)
        self.ids = ids  # the generated subword ids of each (None from an exported model)
        self.settings = settings or {}  # the decoding settings, as DecodeConfig's fields
        self.engine = engine  # which step decoded them and why (qkvmt.decoding.engine), None from an exported model

    def html(self) -> str:
        rows = "".join(
            f"<h2>{i + 1}</h2>" + texts_html([("source", s), ("translation", t)])
            for i, (s, t) in enumerate(zip(self.sources, self))
        )
        shown = ", ".join(f"{k} {v}" for k, v in self.settings.items())
        engine = [("engine", self.engine)] if self.engine else []
        return page("Translations", texts_html([("decoding", shown), *engine]) + rows, {"page": "text"})

    def files(self) -> dict:
        return {
            "translations.txt": lambda path: write_text(Path(path), "".join(t + "\n" for t in self)),
            "translations.json": lambda path: write_json(
                Path(path),
                {
                    "settings": self.settings,
                    "engine": self.engine,
                    "pairs": [{"source": s, "translation": t} for s, t in zip(self.sources, self)],
                },
            ),
            "translations.html": lambda path: write_text(Path(path), self.html()),
        }
