"""docs/runs.json read and checked, a run added to it, and written back.

The record is one JSON object: `hardware_classes` (what a run's `hardware_class` means),
`methods` (how a figure was measured, named by a run's `how_measured`) and `runs`, a list of
entries. Every entry names its command, its machine, whether it ran at the recipe's current
settings (`settings_current`) and whether other work on the machine disturbed it (`disturbed`);
a training run adds its recipe (`experiment`, `overrides`, and the `settings` that decide what it
computes: qkvmt.record.settings), steps, test scores and, where counted, its model's `parameters`.
Its `overrides` are what the recipe as it is today needs to train what the run trained: its
command's, until the recipe changes a default: then its earlier runs gain the override that keeps
what they ran, and lose one the recipe now makes itself (model.positions=sinusoidal, and no
model.positions=rotary, on the CPU recipes' runs from before rotary became their default). A
benchmark or measurement adds a list of labelled `figures`. A faithfulness measurement (figures labelled
"deletion AOPC, <reading>" and "sufficiency, <reading>") names its model in `faithfulness_of`,
the faithfulness table's column; a study of keys and values names its model in `kv_study_of` and
keeps the figures of its tables in `kv_study`, a DecoderLens study likewise in `lens_of` and `lens`,
a study of where cross-attention's mass goes in `sinks_of` and `sinks`, a causal-tracing study in
`tracing_of` and `tracing` (qkvmt.record.from_study), an
AER measurement of each reading in `aer_of` and `aer_readings` (qkvmt.record.from_analysis)."""

import json
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.files import write_json
from qkvmt.studies.faithfulness.table import DELETION

COMMON = (
    "id",
    "kind",
    "command",
    "hardware",
    "hardware_class",
    "cores",
    "date",
    "settings_current",
    "disturbed",
    "how_measured",
)
# A study's figures and its model: under the key and the key with "_of" (qkvmt.record.from_study)
STUDIES = {
    "kv_study": "a study of keys and values",
    "lens": "a DecoderLens study",
    "sinks": "a study of the sinks",
    "tracing": "a causal-tracing study",
}
BY_KIND = {
    "train": ("experiment", "overrides", "settings", "steps", "test"),
    "benchmark": ("what", "figures"),
    "measurement": ("what", "figures"),
}


def load(path: Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no record of runs at {path}: give record=<path to runs.json>")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON ({e}): fix it by hand or restore it from git") from None
    check(record, str(path))
    return record


def check(record: dict, where: str) -> None:
    """Refuse a record a table could not be drawn from, naming the run and the field."""
    for key in ("hardware_classes", "methods", "runs"):
        if key not in record:
            raise UserError(f"{where} has no '{key}': it is not a record of runs")
    seen = set()
    for i, run in enumerate(record["runs"]):
        name = f"{where}, run {run.get('id', f'#{i + 1}')}"
        kind = run.get("kind")
        if kind not in BY_KIND:
            raise UserError(f"{name}: kind {kind!r} is not one of {', '.join(BY_KIND)}")
        missing = [k for k in COMMON + BY_KIND[kind] if k not in run]
        if missing:
            raise UserError(f"{name}: missing {', '.join(missing)}")
        if run["id"] in seen:
            raise UserError(f"{name}: the id is used twice; give the new run another id=")
        seen.add(run["id"])
        if run["hardware_class"] not in record["hardware_classes"]:
            raise UserError(f"{name}: hardware_class {run['hardware_class']!r} is not in hardware_classes")
        if run["how_measured"] not in record["methods"]:
            raise UserError(f"{name}: how_measured {run['how_measured']!r} is not in methods")
        if kind == "train":
            test = run["test"]
            if not all(k in test for k in ("split", "bleu", "signatures")) or "bleu" not in test["signatures"]:
                raise UserError(f"{name}: test needs split, bleu and the BLEU signature")
        else:
            for fig in run["figures"]:
                if "label" not in fig or not isinstance(fig.get("value"), (int, float)):
                    raise UserError(f"{name}: each figure needs a label and a numeric value")
            if any(f["label"].startswith(DELETION) for f in run["figures"]) and not run.get("faithfulness_of"):
                raise UserError(f"{name}: a faithfulness measurement needs faithfulness_of, the model it measured")
            for key, study in STUDIES.items():
                if (key in run) != bool(run.get(f"{key}_of")):
                    raise UserError(f"{name}: {study} needs both {key} and {key}_of, its model")
            if ("aer_readings" in run) != bool(run.get("aer_of")):
                raise UserError(
                    f"{name}: an AER measurement of each reading needs both aer_readings and aer_of, its model"
                )
    for run in record["runs"]:
        for block in run.get("alignment", []):
            other = block.get("with_run")
            if other is not None and other not in seen:
                raise UserError(f"{where}, run {run['id']}: alignment with_run {other!r} is not a run of the record")


def add(record: dict, entry: dict, classes: dict | None = None) -> dict:
    """A new record with `entry` appended (and any hardware class it introduces), checked."""
    if any(r["id"] == entry["id"] for r in record["runs"]):
        raise UserError(f"the record already has a run {entry['id']!r}: give the new run another id=")
    new = {
        **record,
        "hardware_classes": {**(classes or {}), **record["hardware_classes"]},
        "runs": [*record["runs"], entry],
    }
    check(new, "the new run")
    return new


def save(path: Path, record: dict) -> None:
    write_json(Path(path), record)
