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
