"""Opening a model from whatever names it: a .ckpt file, qkvmt's model folder, a Hugging Face
folder, a bundled model's name or hf:ORG/NAME, as a checkpoint dict (qkvmt.model.checkpoint: its
metadata and checks), the Transformer and tokenizer it makes, or the average of several.

It sits above model/, hf/ and bundled/: a Hugging Face folder is read into the model's own blocks
(qkvmt.hf imports qkvmt.model), so the model package cannot be what opens one."""

from dataclasses import replace
from pathlib import Path

from tokenizers import Tokenizer

from qkvmt.bundled import bundled_names, resolve
from qkvmt.errors import UserError
from qkvmt.hf.folder import is_hf_folder, read_hf_folder
from qkvmt.model.checkpoint import (
    USE_ANOTHER,
    CheckpointMeta,
    brief,
    check_same_model,
    checked,
    checked_model,
    last_n,
    load_plain,
    model_weights,
    recent_checkpoints,
)
from qkvmt.model.transformer import Transformer
from qkvmt.model.weights_folder import is_weights_folder, read_weights_folder
from qkvmt.setting_types import as_typed


def load_checkpoint(path) -> dict:
    path = Path(path)
    if is_hf_folder(path):  # first: a folder exported to Hugging Face also holds our safetensors folder's names
        return checked(read_hf_folder(path), path)
    if is_weights_folder(path):
        return checked(read_weights_folder(path), path)
    if path.is_dir():
        raise UserError(f"ckpt_path={path} is a folder; set it to a .ckpt file in it (e.g. last.ckpt)")
    if not path.is_file():
        raise UserError(
            f"checkpoint not found: {path}; set ckpt_path to a .ckpt file, a model folder or a bundled "
            f"model's name ({', '.join(bundled_names()) or 'none installed'})"
        )
    if path.suffix == ".safetensors":  # torch.load would call it no qkvmt checkpoint, which says too little
        raise UserError(
            f"{path} is the weights file of a model folder, which loads as a whole: give the folder "
            f"{path.parent} instead (model.safetensors with tokenizer.json and qkvmt.json beside it)"
        )
    ckpt = load_plain(path, "checkpoint", USE_ANOTHER)
    return checked(ckpt, path)


def build_model(ckpt: dict, path="checkpoint") -> tuple[Transformer, Tokenizer]:
    model = checked_model(ckpt, path)
    model.eval()
    meta = CheckpointMeta.from_dict(ckpt["qkvmt"])
    if meta.tokenizer_files is not None:  # before hf_folder: the file alone makes the tokenizer
        from qkvmt.hf.tokenizer_files import from_text, open_files

        return model, open_files(from_text(meta.tokenizer_files), meta.src_lang, meta.tgt_lang)
    if meta.hf_folder is not None:
        from qkvmt.hf.tokenizers import load_tokenizer

        return model, load_tokenizer(meta.hf_folder)
    try:
        tokenizer = Tokenizer.from_str(meta.tokenizer)
    except Exception as e:  # tokenizers raises a bare Exception for a malformed definition
        raise UserError(f"{path}: the tokenizer stored in it is not readable ({brief(e)}); {USE_ANOTHER}") from None
    return model, tokenizer


def load_model(path) -> tuple[Transformer, Tokenizer, CheckpointMeta]:
    """Model (in eval mode), tokenizer and metadata (languages, config) from one checkpoint file."""
    ckpt = load_checkpoint(path)
    model, tok = build_model(ckpt, path)
    return model, tok, CheckpointMeta.from_dict(ckpt["qkvmt"])


def resolve_average(ckpt_path, average=None) -> list[Path]:
    """The checkpoint files an evaluation uses.

    average=None: just ckpt_path. average="lastN": the N most recent step*.ckpt next to ckpt_path
    (or in it, if it is a folder). average=[paths]: those files.
    """
    ckpt_path = resolve(ckpt_path) if ckpt_path else None
    if average is None:
        if ckpt_path is None:
            raise UserError("no checkpoint given: set ckpt_path=<file.ckpt>")
        return [ckpt_path]
    if not isinstance(average, list | tuple):  # lastN; average=5 or average=true names no paths either
        n = last_n(average)
        if n is None:
            raise UserError(f"average={as_typed(average)}: use lastN (e.g. last5) or a list of checkpoint paths")
        if ckpt_path is None:
            raise UserError("average=lastN needs ckpt_path=<a checkpoint in the run, or its checkpoints folder>")
        folder = ckpt_path if ckpt_path.is_dir() else ckpt_path.parent
        found = recent_checkpoints(folder, n)
        if len(found) < n:
            none = "" if found else "; a training run's checkpoints folder has them, a bundled or exported model none"
            raise UserError(f"average={average}: {folder} has only {len(found)} step*.ckpt checkpoint(s){none}")
        return found
    paths = [resolve(p) for p in average]
    seen = {}
    for p in paths:
        key = p.resolve()
        if key in seen:
            raise UserError(
                f"average lists {seen[key]} more than once (as {p}): "
                "each checkpoint counts once; give distinct checkpoints"
            )
        seen[key] = p
    return paths


def check_resumable(path: Path, model_config: dict) -> None:
    """Refuse to resume from a checkpoint of another model, naming the settings that differ,
    before the run writes anything (vocabulary size and special ids come from the tokenizer)."""
    stored = CheckpointMeta.from_dict(load_checkpoint(path)["qkvmt"]).settings
    check_same_model(
        stored,
        model_config,
        f"resume={path}",
        "resume with the settings it was trained with, or start afresh in another folder (hydra.run.dir=...)",
    )


def average_checkpoints(paths: list[Path]) -> dict:
    """A checkpoint whose weights are the mean of the given ones' (Vaswani et al. averaged 5-20)."""
    first = load_checkpoint(paths[0])
    meta = CheckpointMeta.from_dict(first["qkvmt"])
    total = {k: v.double() for k, v in model_weights(first).items()}
    for p in paths[1:]:
        ckpt = load_checkpoint(p)
        other = CheckpointMeta.from_dict(ckpt["qkvmt"])
        if (other.settings, other.tokenizer) != (meta.settings, meta.tokenizer):
            raise UserError(f"cannot average {p} with {paths[0]}: different model configuration or tokenizer")
        for k, v in model_weights(ckpt).items():
            total[k] += v.double()
    weights = {f"model.{k}": (v / len(paths)).to(first["state_dict"][f"model.{k}"].dtype) for k, v in total.items()}
    return {"state_dict": weights, "qkvmt": replace(meta, averaged_from=[str(p) for p in paths]).to_dict()}
