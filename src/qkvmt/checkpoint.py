"""Self-contained checkpoints: load safely, rebuild model and tokenizer from the file alone.

A checkpoint holds plain data only (tensors, dicts, strings, numbers), so it is read with
`torch.load(weights_only=True)`, which refuses to run pickled code.
"""

import pickle
import zipfile
from pathlib import Path

import torch
from tokenizers import Tokenizer

from qkvmt.config import ModelConfig
from qkvmt.errors import UserError
from qkvmt.model import Transformer


def load_checkpoint(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}; set ckpt_path to a .ckpt file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise UserError(f"{path} holds code or objects that are not plain data; refusing to load it ({e})") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as e:
        raise UserError(f"{path} is not a readable checkpoint (truncated or corrupt?): {e}") from None
    if not isinstance(ckpt, dict) or "qkvmt" not in ckpt or "state_dict" not in ckpt:
        raise UserError(f"{path} is not a qkvmt checkpoint (no model configuration or weights in it)")
    return ckpt


def model_weights(ckpt: dict) -> dict:
    """The Transformer's own weights, without the LightningModule's `model.` prefix."""
    return {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}


def build_model(ckpt: dict, path="checkpoint") -> tuple[Transformer, Tokenizer]:
    meta = ckpt["qkvmt"]
    model = Transformer(ModelConfig.from_dict(meta["model_config"]))
    try:
        model.load_state_dict(model_weights(ckpt))
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0]
        raise UserError(f"{path}: the weights do not match the model configuration stored with them ({first})") from None
    model.eval()
    return model, Tokenizer.from_str(meta["tokenizer"])


def load_model(path) -> tuple[Transformer, Tokenizer, dict]:
    """Model (in eval mode), tokenizer and metadata (languages, config) from one checkpoint file."""
    ckpt = load_checkpoint(path)
    model, tok = build_model(ckpt, path)
    return model, tok, ckpt["qkvmt"]


def resolve_average(ckpt_path, average=None) -> list[Path]:
    """The checkpoint files an evaluation uses.

    average=None: just ckpt_path. average="lastN": the N most recent step*.ckpt next to ckpt_path
    (or in it, if it is a folder). average=[paths]: those files.
    """
    ckpt_path = Path(ckpt_path) if ckpt_path else None
    if average is None:
        if ckpt_path is None:
            raise UserError("no checkpoint given: set ckpt_path=<file.ckpt>")
        return [ckpt_path]
    if isinstance(average, str):
        if not (average.startswith("last") and average[4:].isdigit() and int(average[4:]) > 0):
            raise UserError(f"average={average!r}: use lastN (e.g. last5) or a list of checkpoint paths")
        if ckpt_path is None:
            raise UserError("average=lastN needs ckpt_path=<a checkpoint in the run, or its checkpoints folder>")
        folder = ckpt_path if ckpt_path.is_dir() else ckpt_path.parent
        n = int(average[4:])
        found = sorted(folder.glob("step*.ckpt"))  # zero-padded step numbers sort in order
        if len(found) < n:
            raise UserError(f"average={average}: {folder} has only {len(found)} step*.ckpt checkpoint(s)")
        return found[-n:]
    return [Path(p) for p in average]


def average_checkpoints(paths: list[Path]) -> dict:
    """A checkpoint whose weights are the mean of the given ones' (Vaswani et al. averaged 5-20)."""
    first = load_checkpoint(paths[0])
    meta = first["qkvmt"]
    total = {k: v.double() for k, v in model_weights(first).items()}
    for p in paths[1:]:
        ckpt = load_checkpoint(p)
        if ckpt["qkvmt"]["model_config"] != meta["model_config"] or ckpt["qkvmt"]["tokenizer"] != meta["tokenizer"]:
            raise UserError(f"cannot average {p} with {paths[0]}: different model configuration or tokenizer")
        for k, v in model_weights(ckpt).items():
            total[k] += v.double()
    weights = {f"model.{k}": (v / len(paths)).to(first["state_dict"][f"model.{k}"].dtype) for k, v in total.items()}
    return {"state_dict": weights, "qkvmt": {**meta, "averaged_from": [str(p) for p in paths]}}
