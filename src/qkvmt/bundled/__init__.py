"""The trained models that ship with qkvmt, by name: `qkvmt.pretrained()` lists them,
`qkvmt.load(NAME)` (or `qkvmt.load(entry)`, an entry of that list) and every command's
`ckpt_path=NAME` open them.

Each is a folder beside this file in qkvmt's own safetensors format (qkvmt.model.weights_folder),
trained with a documented recipe; its qkvmt.json says how (`provenance`: recipe, command,
commit, machine, steps, time, and the test scores of the stored weights with their sacreBLEU
signatures). A path that exists always wins over a bundled name, so a run folder called
`multi30k-de-en` still opens as itself. Their outputs go under `outputs/pretrained/NAME/`
where the command runs (conf/paths), never into the installed package.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = "multi30k-de-en"  # what scripts/explore.py opens without ckpt_path=


def bundled_names() -> list[str]:
    return sorted(p.name for p in HERE.iterdir() if (p / "qkvmt.json").is_file())


def resolve(spec) -> Path:
    """The path `spec` names: an existing file or folder as it is, else a bundled model's folder.

    spec: a path as text, any os.PathLike (a pathlib.Path, or an entry of `pretrained()`, which
    names its folder), a bundled model's name, or hf:ORG/NAME (qkvmt.hf.hub)."""
    if not isinstance(spec, str | bytes | os.PathLike):
        raise TypeError(
            f"a model is a path, a bundled model's name or an entry of qkvmt.pretrained(), not {type(spec).__name__}"
        )
    text = os.fsdecode(spec)
    if text.startswith("hf:"):  # a Hugging Face Hub model, in (or fetched into) huggingface_hub's cache
        from qkvmt.hf.hub import hub_folder

        return hub_folder(text.removeprefix("hf:"))
    path = Path(text)
    if not path.exists() and text in bundled_names():
        return HERE / text
    return path


def names_nothing(spec: str) -> bool:
    """Whether `spec` names no model here, checked before a slow load: no file or folder, nor a
    bundled model (hf:ORG/NAME is fetched as it loads: nothing to look at beforehand)."""
    return not spec.startswith("hf:") and not resolve(spec).exists()


def bundled_name(path) -> str | None:
    """NAME if `path` is a bundled model's folder, else None."""
    path = Path(path).resolve()
    return path.name if path.parent == HERE and path.name in bundled_names() else None


@dataclass(frozen=True)
class Pretrained:
    """One bundled model, as `qkvmt.pretrained()` lists it."""

    name: str
    src_lang: str
    tgt_lang: str
    experiment: str
    test_split: str
    test_bleu: float
    test_chrf: float
    steps: int
    train_minutes: float
    machine: str
    folder: Path

    def __repr__(self) -> str:
        return (
            f"<{self.name}: {self.src_lang}->{self.tgt_lang}, {self.experiment}, {self.test_split} BLEU "
            f"{self.test_bleu:.2f} chrF {self.test_chrf:.2f}, {self.steps:,} steps in {self.train_minutes:.0f} min "
            f"on {self.machine}>"
        )

    def __fspath__(self) -> str:
        """Its folder: an entry is a path wherever one is taken (`qkvmt.load(entry)`, `Path(entry)`)."""
        return os.fspath(self.folder)

    @property
    def provenance(self) -> dict:
        """Everything its qkvmt.json records about how it was made and scored."""
        return json.loads((self.folder / "qkvmt.json").read_text(encoding="utf-8"))["provenance"]


def pretrained() -> list[Pretrained]:
    """The bundled models, by name."""
    out = []
    for name in bundled_names():
        meta = json.loads((HERE / name / "qkvmt.json").read_text(encoding="utf-8"))
        p = meta["provenance"]
        out.append(
            Pretrained(
                name,
                meta["src_lang"],
                meta["tgt_lang"],
                p["experiment"],
                p["test"]["split"],
                p["test"]["bleu"],
                p["test"]["chrf"],
                p["steps"],
                p["train_wall_s"] / 60,
                p["machine"]["summary"],
                HERE / name,
            )
        )
    return out


def reverse_of(path) -> Path | None:
    """The folder of the bundled model of the other direction when `path` is a bundled model's
    folder and one ships with the same tokenizer (its links then pair with this model's, for
    symmetrized alignments); else None."""
    name = bundled_name(path)
    if name is None:
        return None
    listed = {p.name: p for p in pretrained()}
    own = listed[name]
    tokenizer = (own.folder / "tokenizer.json").read_bytes()
    for p in listed.values():
        if (p.src_lang, p.tgt_lang) == (own.tgt_lang, own.src_lang) and (
            p.folder / "tokenizer.json"
        ).read_bytes() == tokenizer:
            return p.folder
    return None
