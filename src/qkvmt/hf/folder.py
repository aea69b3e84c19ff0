"""A Hugging Face model folder as a checkpoint dict ({"state_dict", "qkvmt"}), which `build_model`
takes as it takes a .ckpt file's: config.json, generation_config.json, the weights, and the folder's
tokenizer files, which `qkvmt.hf.tokenizers` opens (the metadata names the folder)."""

import os
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.config import decode_settings, model_config
from qkvmt.hf.json_files import read_json
from qkvmt.hf.tokenizers import load_tokenizer
from qkvmt.hf.vocabulary import check_vocabulary
from qkvmt.hf.weights import WEIGHT_FILES, Tensors, check_layer_counts, state_dict, weight_file
from qkvmt.model.checkpoint import brief
from qkvmt.model.weights_folder import is_weights_folder

CONFIG, GENERATION = "config.json", "generation_config.json"


def is_hf_folder(path) -> bool:
    """Whether `path` is a folder with a config.json that names a model_type (any: the import names the ones
    it cannot open), or one that is no readable JSON object, or names none in a folder that is not qkvmt's own
    (is_weights_folder): read_hf_folder names what is wrong with the file."""
    path = Path(path)
    if not (path.is_dir() and os.path.lexists(path / CONFIG)):  # lexists: a symlink loop is named too
        return False
    try:
        return "model_type" in read_json(path / CONFIG) or not is_weights_folder(path)
    except UserError:
        return True


def read_hf_folder(folder) -> dict:
    """The checkpoint dict of a Marian or M2M100 folder, checked as a whole; a UserError naming the file, before
    any model is built, for what qkvmt cannot open: another model_type, a config value of another type or
    range or that the blocks cannot compute, generation settings of another type, weights that do not fit or
    are not finite, no weights, tokenizer files that do not open or whose ids are not the weights' rows."""
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
        tensors = Tensors(path)
        check_layer_counts(tensors, cfg, path, folder / CONFIG)  # before a model of that many is built
        weights = state_dict(tensors, cfg, path)
    except UserError:
        raise
    except Exception as e:  # safetensors, torch.load and json each fail in their own ways on a bad file
        raise UserError(f"{path} is not a readable weights file ({brief(e)})") from None
    check_vocabulary(load_tokenizer(folder), cfg, folder)
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
