"""A model as a folder of plain files: model.safetensors, tokenizer.json and qkvmt.json.

The same thing a checkpoint holds, minus the training state, in formats that load without
pickle: safetensors for the weights (optionally in half precision, half the size), the
tokenizer's own JSON, and the checkpoint's metadata as JSON. A tokenizer that is a set of files
(a model opened from Hugging Face, or a run's SentencePiece vocabulary) is kept in qkvmt.json
instead, as a checkpoint keeps it (`tokenizer_files`), and there is no tokenizer.json. `scripts/export.py
format=safetensors` writes one; `qkvmt.load(folder)` and every command's `ckpt_path=` read it;
the models that ship with qkvmt (qkvmt.pretrained) are such folders.

qkvmt.json may also carry `provenance`: how the weights were made (recipe, commit, machine,
scores), which loading ignores.
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tokenizers import Tokenizer

from qkvmt.errors import UserError
from qkvmt.files import atomic_write, write_json, write_text
from qkvmt.model.transformer import Transformer

if TYPE_CHECKING:  # checkpoint.py reads these folders, so it imports this module
    from qkvmt.model.checkpoint import CheckpointMeta

FORMAT = "safetensors"
WEIGHTS, TOKENIZER, METADATA = "model.safetensors", "tokenizer.json", "qkvmt.json"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def is_weights_folder(folder) -> bool:
    return Path(folder).is_dir() and not missing_files(folder)


def missing_files(folder) -> list[str]:
    """The files of a model folder that `folder` lacks."""
    folder = Path(folder)
    needed = (WEIGHTS, METADATA) if keeps_tokenizer_files(folder) else (WEIGHTS, TOKENIZER, METADATA)
    return [n for n in needed if not (folder / n).is_file()]


def keeps_tokenizer_files(folder: Path) -> bool:
    """Whether the folder's qkvmt.json keeps its tokenizer's files (so it has no tokenizer.json)."""
    try:
        return "tokenizer_files" in json.loads((folder / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):  # no, or no readable, qkvmt.json: read_weights_folder names it
        return False


def write_weights_folder(
    model: Transformer, tokenizer: Tokenizer, meta: "CheckpointMeta", out: Path, dtype: str = "float32"
) -> None:
    """Fill the empty folder `out`; the weights are stored as `dtype` (float32, float16, bfloat16)."""
    from safetensors.torch import save

    if dtype not in DTYPES:
        raise UserError(f"dtype={dtype!r}: use one of {', '.join(DTYPES)}")
    # Tied weights (the embeddings and the output projection) are one tensor under several
    # names: stored once, the others recorded as aliases (a third of a small model's bytes).
    weights, aliases, seen = {}, {}, {}
    for name, tensor in model.state_dict().items():
        key = (tensor.data_ptr(), tensor.shape, tensor.stride())
        if key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        weights[name] = tensor.detach().to("cpu", DTYPES[dtype]).contiguous()
    atomic_write(out / WEIGHTS, lambda f: f.write(save(weights)))
    if meta.tokenizer_files is None:  # else the files are the tokenizer, kept in qkvmt.json
        write_text(out / TOKENIZER, tokenizer.to_str())
    stored = {k: v for k, v in meta.to_dict().items() if k != "tokenizer"}
    write_json(out / METADATA, {"format": FORMAT, "dtype": dtype, "aliases": aliases, **stored})


def read_weights_folder(folder) -> dict:
    """The folder as a checkpoint dict ({"state_dict", "qkvmt"}, weights in float32), which
    build_model and average_checkpoints take as they take a .ckpt file's."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        meta = json.loads((folder / METADATA).read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(
                f"format is {meta.get('format')!r}, not {FORMAT!r}" if isinstance(meta, dict) else "not an object"
            )
        weights = load_file(folder / WEIGHTS)
        weights |= {name: weights[stored] for name, stored in meta.get("aliases", {}).items()}
        tokenizer = "" if "tokenizer_files" in meta else (folder / TOKENIZER).read_text(encoding="utf-8")
    except (
        OSError,
        ValueError,
        KeyError,
        SafetensorError,
    ) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UserError(
            f"{folder} is not a readable model folder ({type(e).__name__}: {e}); use a "
            f"folder written by qkvmt export format=safetensors, or a checkpoint"
        ) from None
    meta["tokenizer"] = tokenizer
    return {"state_dict": {f"model.{k}": v.float() for k, v in weights.items()}, "qkvmt": meta}


def add_provenance(folder, provenance: dict) -> None:
    """Record in the folder's qkvmt.json how its weights were made and scored."""
    path = Path(folder) / METADATA
    write_json(path, json.loads(path.read_text(encoding="utf-8")) | {"provenance": provenance})
