"""What a training run leaves beside its checkpoints (<run>/checkpoints/x.ckpt) that commands read
later: the data it trained on (run.json) and its validation curve (csv/metrics.csv)."""

import csv
import json
from pathlib import Path


def run_folder(ckpt: Path) -> Path:
    """The training run a checkpoint belongs to (<run>/checkpoints/x.ckpt), else its folder."""
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent


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
                out["_target_"] = new + target[len(old) :]
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
