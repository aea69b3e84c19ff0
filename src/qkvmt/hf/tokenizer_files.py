"""A Hugging Face folder's tokenizer files as plain data, so a model fine-tuned from the folder does not need it.

A run that starts from a folder (init_from) keeps the files' contents in every checkpoint's metadata (base64
text: torch.load(weights_only=True) reads it) and copies them into its run folder; the tokenizer is opened
again from them, with the language pair the checkpoint names (a many-to-many model's).
"""

import base64
import hashlib
import tempfile
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.files import atomic_write, write_json
from qkvmt.hf.families import FAMILIES

# Every file qkvmt.hf.tokenizers reads: each family's, a tokenizer.json, and the configuration that names
# special and language tokens.
TOKENIZER_FILES = tuple(
    dict.fromkeys(
        [
            *(name for family in FAMILIES.values() for name in (*family.tokenizer_files, *family.other_files)),
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
        ]
    )
)


def read_files(folder) -> dict[str, bytes]:
    """The tokenizer files `folder` holds, by name; a UserError when they do not make a tokenizer."""
    from qkvmt.hf.tokenizers import load_tokenizer

    folder = Path(folder)
    load_tokenizer(folder)  # names the files a folder lacks, before anything is kept
    return {name: (folder / name).read_bytes() for name in TOKENIZER_FILES if (folder / name).is_file()}


def files_of(meta) -> dict[str, bytes] | None:
    """The tokenizer files of a checkpoint's metadata (CheckpointMeta): those a fine-tuned run keeps, or its
    Hugging Face folder's; None for a model with qkvmt's own tokenizer. What an export writes beside it."""
    if meta.tokenizer_files is not None:
        return from_text(meta.tokenizer_files)
    return read_files(meta.hf_folder) if meta.hf_folder is not None else None


def as_text(files: dict[str, bytes]) -> dict[str, str]:
    """As a checkpoint's metadata keeps them."""
    return {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}


def from_text(files: dict[str, str]) -> dict[str, bytes]:
    return {name: base64.b64decode(text) for name, text in files.items()}


def digest(files: dict[str, bytes]) -> str:
    """Names and contents: the same files give the same digest, whichever folder they were read from."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()[:20]


def open_files(files: dict[str, bytes], src_lang: str = "", tgt_lang: str = ""):
    """The tokenizer the files make, set to src_lang -> tgt_lang where it is a many-to-many one. The files
    go into a folder of their own only while it opens: SentencePiece and `tokenizers` read them whole."""
    from qkvmt.hf.languages import ManyToMany
    from qkvmt.hf.tokenizers import load_tokenizer

    unknown = sorted(set(files) - set(TOKENIZER_FILES))
    if unknown:  # a name with a path in it must not write outside the folder
        raise UserError(f"the stored tokenizer files include {unknown[0]!r}, which is not a tokenizer file")
    with tempfile.TemporaryDirectory(prefix="qkvmt-tokenizer-") as folder:
        for name, data in files.items():
            (Path(folder) / name).write_bytes(data)
        tok = load_tokenizer(folder)
    if isinstance(tok, ManyToMany) and (src_lang or tgt_lang):
        tok = tok.with_languages(src_lang or None, tgt_lang or None)
    return tok


def keep_in_run(files: dict[str, bytes], folder: Path) -> None:
    """The files into a run's `folder` (tokenizer/ beside its checkpoints), with the record of which files
    they are: a rerun in the folder with other files, or a run there that trained its own tokenizer, is
    refused before it writes (as qkvmt.text.tokenizer.load_or_train refuses other settings)."""
    kept_files(folder, {"init_from": digest(files)}, lambda: files)


def kept_files(folder: Path, settings: dict, make) -> dict[str, bytes]:
    """The tokenizer files a run keeps in `folder`: those there if its record says they were made with
    `settings` (a UserError naming what differs if with others), else `make()`'s, written there."""
    from qkvmt.text.tokenizer import check_settings

    record = folder.with_name(folder.name + ".settings.json")
    if record.exists():
        check_settings(folder, record, settings)
        if folder.is_dir():
            return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name in TOKENIZER_FILES}
    files = make()
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():  # each whole or not at all: every DDP process writes the same files
        atomic_write(folder / name, lambda f, data=data: f.write(data))
    write_json(record, settings)  # last: a record says the files beside it are whole
    return files
