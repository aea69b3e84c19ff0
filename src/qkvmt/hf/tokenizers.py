"""A Hugging Face folder's tokenizer: its family's files (qkvmt.hf.families), opened as the family's module
opens them, or a tokenizer.json, which the `tokenizers` library opens for any family. Each has the methods
qkvmt calls on a `tokenizers.Tokenizer`, so every command and view takes it as it takes a model's own.

The family is config.json's model_type. Tokenizer files kept without their config.json (in a checkpoint, a
run folder or an export) are the first family's whose files are all there.
"""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.families import FAMILIES, family_named
from qkvmt.hf.family import Family
from qkvmt.hf.json_files import read_json
from qkvmt.hf.languages import tokenizer_json_languages
from qkvmt.model.checkpoint import brief


def load_tokenizer(folder) -> object:
    """The tokenizer of a Hugging Face folder: its family's files, or a tokenizer.json; a UserError naming the
    files it needs when the folder has neither."""
    folder = Path(folder)
    config_path = folder / "tokenizer_config.json"
    config = read_json(config_path) if config_path.is_file() else {}
    family = tokenizer_family(folder)
    if family is not None and holds(folder, family.tokenizer_files):
        return family.open_tokenizer(folder, config)
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as e:  # the tokenizers library raises a bare Exception for a malformed file
            raise UserError(f"{folder / 'tokenizer.json'} is not a tokenizer ({brief(e)})") from None
        return tokenizer_json_languages(tokenizer, folder, config)
    needs = ", ".join(f"{family.title}'s {', '.join(family.tokenizer_files)}" for family in FAMILIES.values())
    raise UserError(f"{folder} has no tokenizer files: it needs {needs} or a tokenizer.json")


def tokenizer_family(folder: Path) -> Family | None:
    """The family of the folder's config.json, or where it has none of ours, the first whose tokenizer files
    are all there."""
    path = folder / "config.json"
    family = family_named(read_json(path).get("model_type")) if path.is_file() else None
    return family or next((family for family in FAMILIES.values() if holds(folder, family.tokenizer_files)), None)


def holds(folder: Path, names: tuple[str, ...]) -> bool:
    return all((folder / name).is_file() for name in names)
