"""A Hugging Face model folder as a checkpoint dict ({"state_dict", "qkvmt"}), which `build_model`
takes as it takes a .ckpt file's: config.json, generation_config.json, the weights, and the folder's
tokenizer files, which `qkvmt.hf.tokenizers` opens (the metadata names the folder)."""

import json
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.config import decode_settings, model_config
from qkvmt.hf.weights import WEIGHT_FILES, Tensors, state_dict, weight_file

CONFIG, GENERATION = "config.json", "generation_config.json"


def is_hf_folder(path) -> bool:
    """Whether `path` is a folder with a config.json that names a model_type (any: the import names
    the ones it cannot open)."""
    path = Path(path)
    if not (path.is_dir() and (path / CONFIG).is_file()):
        return False
    try:
        return "model_type" in json.loads((path / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is not readable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object")
    return data


def read_hf_folder(folder) -> dict:
    """The checkpoint dict of a Marian or M2M100 folder; a UserError, before any weight is used, for what
    qkvmt cannot open (another model_type, a config value the blocks cannot compute, weights that do not fit
    or are not finite, no weights)."""
    folder = Path(folder)
    hf = read_json(folder / CONFIG)
    cfg = model_config(hf, folder / CONFIG)
    # Older folders keep the generation settings in config.json; newer ones in generation_config.json.
    gen = read_json(folder / GENERATION) if (folder / GENERATION).is_file() else hf
    decode = decode_settings(gen, cfg, folder / (GENERATION if gen is not hf else CONFIG))
    path = weight_file(folder)
    if path is None:
        raise UserError(f"{folder} holds no weights: it needs one of {', '.join(WEIGHT_FILES)}")
    try:  # each tensor is read as it is taken: a file that is cut short fails part-way
        weights = state_dict(Tensors(path), cfg, path)
    except UserError:
        raise
    except Exception as e:  # safetensors, torch.load and json each fail in their own ways on a bad file
        raise UserError(f"{path} is not a readable weights file ({type(e).__name__}: {str(e)[:120]})") from None
    src_lang, tgt_lang = languages(folder)
    meta = {
        "model_config": cfg.to_dict(),
        "tokenizer": "",  # the folder's own files are the tokenizer (hf_folder)
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "decode": decode,
        "hf_folder": str(folder),
    }
    return {"state_dict": {f"model.{k}": v for k, v in weights.items()}, "qkvmt": meta}


def languages(folder: Path) -> tuple[str, str]:
    """The language pair tokenizer_config.json names (Marian's source_lang and target_lang, M2M100's src_lang
    and tgt_lang), "" where it names none: a many-to-many model's pair is chosen per call."""
    path = folder / "tokenizer_config.json"
    tc = read_json(path) if path.is_file() else {}
    src = tc.get("source_lang") or tc.get("src_lang") or ""
    tgt = tc.get("target_lang") or tc.get("tgt_lang") or ""
    return str(src), str(tgt)
