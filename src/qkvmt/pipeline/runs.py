"""What evaluate, translate, average, align and inspect share: loading a checkpoint (or an
average of several) where Lightning Fabric places it, decoding settings, output folders."""

import csv
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.model.checkpoint import average_checkpoints, build_model, load_checkpoint, resolve_average
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.files import check_new_output
from qkvmt.text.tokenizer import decode
from qkvmt.decoding.lines import translate_ids


def checkpoint_paths(cfg: DictConfig) -> list[Path]:
    average = OmegaConf.to_object(cfg.average) if OmegaConf.is_list(cfg.average) else cfg.average
    return resolve_average(cfg.ckpt_path, average)


def load_on_cpu(cfg: DictConfig):
    """(model on the CPU, tokenizer, metadata, checkpoint paths) of ckpt_path, or of the average
    of the checkpoints `average` names."""
    paths = checkpoint_paths(cfg)
    ckpt = average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])
    model, tokenizer = build_model(ckpt, paths[0])
    return model, tokenizer, ckpt["qkvmt"], paths


def load_for_inference(cfg: DictConfig):
    """(model placed by Lightning Fabric, tokenizer, metadata, Fabric, checkpoint paths)."""
    model, tokenizer, meta, paths = load_on_cpu(cfg)
    fabric = instantiate(cfg.fabric)  # accelerator=auto: the GPU when there is one
    return fabric.to_device(model), tokenizer, meta, fabric, paths


def checkpoint_decoding(cfg_decode: DictConfig, meta: dict) -> DecodeConfig:
    """The checkpoint's own decoding settings (its run's test_decode), with every field the
    command line sets (non-null in `decode`) taking precedence."""
    given = {k: v for k, v in OmegaConf.to_container(cfg_decode).items() if v is not None and k != "_target_"}
    return DecodeConfig(**(meta.get("decode", {}) | given))


def run_folder(ckpt: Path) -> Path:
    """The training run a checkpoint belongs to (<run>/checkpoints/x.ckpt), else its folder."""
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent


def default_output_dir(ckpt: Path, name: str, kind: str = "evaluations") -> Path:
    """A new folder beside the checkpoint's run, <run>/<kind>/<name>_<time>[-k], created here so
    that two commands finishing in the same second never share it."""
    base = run_folder(ckpt) / kind / f"{name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    base.parent.mkdir(parents=True, exist_ok=True)
    out, k = base, 1
    while True:
        try:
            out.mkdir()
            return out
        except FileExistsError:
            out, k = base.with_name(f"{base.name}-{k}"), k + 1


# Where classes a run.json may name lived before the package was grouped by concept: a run
# trained then still evaluates and aligns.
MOVED_TARGETS = {
    "qkvmt.data.TranslationDataModule": "qkvmt.data.datamodule.TranslationDataModule",
    "qkvmt.sources.": "qkvmt.text.sources.",
}


def run_data(ckpt: Path) -> dict | None:
    """The data configuration the checkpoint's training run recorded in run.json (paths
    resolved), or None for a checkpoint outside its run folder or from an older run."""
    record = run_folder(ckpt) / "run.json"
    return current_targets(json.loads(record.read_text()).get("data")) if record.is_file() else None


def current_targets(config):
    """`config` with every `_target_` that names a moved class renamed to where it is now."""
    if isinstance(config, list):
        return [current_targets(v) for v in config]
    if not isinstance(config, dict):
        return config
    out = {k: current_targets(v) for k, v in config.items()}
    target = out.get("_target_")
    if isinstance(target, str):
        for old, new in MOVED_TARGETS.items():
            if target == old or (old.endswith(".") and target.startswith(old)):
                out["_target_"] = new + target[len(old):]
    return out


def validation_curve(ckpt: Path) -> list[dict]:
    """[{step, bleu, chrf}] of every validation the checkpoint's run logged to <run>/csv/metrics.csv
    ([] without one). Lightning logs the step before the validation's, so 1 is added: the steps
    then match the console's "validation at step N" and the step<N>.ckpt names. A step logged
    twice (a resumed run validates again) keeps its last value."""
    path = run_folder(ckpt) / "csv" / "metrics.csv"
    if not path.is_file():
        return []
    points = {}
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                if row.get("val/bleu"):
                    chrf = float(row["val/chrf"]) if row.get("val/chrf") else None
                    points[int(row["step"]) + 1] = {"bleu": float(row["val/bleu"]), "chrf": chrf}
            except (KeyError, ValueError):
                continue  # a foreign or damaged row: the curve shows what can be read
    return [{"step": step, **points[step]} for step in sorted(points)]


def check_output_dir(cfg: DictConfig) -> None:
    """An explicit output_dir that cannot take the outputs is refused before any slow work."""
    if cfg.output_dir:
        check_new_output(Path(cfg.output_dir), "output_dir", folder=True)


class StagedOutput:
    """Outputs are written into a hidden folder beside their destination and moved into place
    only once complete, so an error or Ctrl-C leaves either every file or none:

        staged = StagedOutput(cfg, paths, "align", kind="alignments")
        with staged as out:
            write_json(out / "alignment.json", data)
        print(staged.final)
    """

    def __init__(self, cfg: DictConfig, paths: list[Path], name: str, kind: str):
        self.explicit = Path(cfg.output_dir) if cfg.output_dir else None
        self.ckpt, self.name, self.kind = paths[0], name, kind
        self.final: Path | None = None

    def __enter__(self) -> Path:
        parent = self.explicit.parent if self.explicit else run_folder(self.ckpt) / self.kind
        parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.name}.partial-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        self.tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would outlive the rename
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return False
        final = self.explicit or default_output_dir(self.ckpt, self.name, kind=self.kind)
        if final.is_dir():
            final.rmdir()  # reserved by default_output_dir, or an empty output_dir: never one with files
        self.tmp.rename(final)
        self.final = final
        return False


def required_text(value, name: str) -> str:
    """The text of a sentence=/reference= setting; missing, blank or undecodable text is a UserError."""
    example = f'give the text, e.g. {name}="Ein Mann fährt Fahrrad ."'
    if value is None:
        raise UserError(f"no {name} given: {example}")
    text = str(value)
    if not text.strip():
        raise UserError(f"{name} is empty: {example}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line arrive as lone surrogates
        raise UserError(f"{name} is not valid UTF-8 text: give it in UTF-8 (check the terminal's encoding)") from None
    return text


def target_of(cfg: DictConfig, model, tokenizer, meta: dict, fabric, sentence: str) -> tuple[str, str | list[int]]:
    """(target text, what to force-decode): the given reference, or the model's own translation
    as the exact ids it generated with the checkpoint's decoding settings."""
    if cfg.reference is not None:
        reference = required_text(cfg.reference, "reference")
        return reference, reference
    with fabric.autocast():
        ids = translate_ids(model, tokenizer, [sentence], checkpoint_decoding(cfg.decode, meta))[0]
    return decode(tokenizer, [ids])[0], ids
