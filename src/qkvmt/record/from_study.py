"""A record entry from the output folder of a study: of keys and values (`qkvmt intervene
study=...`, Model.study, qkvmt.studies.kv.corpus), DecoderLens's (study=lens, Model.lens_study,
qkvmt.studies.lens.corpus), of where cross-attention's mass goes (`qkvmt sinks`, Model.sinks,
qkvmt.studies.sinks.corpus), or causal tracing's (`qkvmt patch`, Model.patch_study,
qkvmt.studies.patching.corpus). Its study.json (sinks.json, patch.json) holds the model, the
sentences, the machine it ran on, the date and the time; the entry keeps the figures
docs/analysis.md shows under the study's key (`kv_study`, read by qkvmt.studies.kv.table; `lens`,
by qkvmt.studies.lens.table; `sinks`, by qkvmt.studies.sinks.table; `tracing`, by
qkvmt.studies.patching.table) and names its model in that key with `_of` (`kv_study_of`, ...)."""

import re
from pathlib import Path

from qkvmt.record.from_folder import describe, free_id, read_json

DEFAULT_SPLIT, DEFAULT_SUBSTITUTES = "test_2016_flickr", 5  # conf/intervene.yaml's
PATCH_DEFAULTS = {
    "names": "decoder.*.cross.v",
    "metric": "log_prob",
    "method": "patching",
    "unequal": "error",
}  # patch.yaml's
KEPT = ("model", "split", "n", "skipped", "substitutes", "swap", "patch")  # what the tables read
LENS_KEPT = ("model", "split", "n", "depths", "signatures")
SINKS_KEPT = ("model", "split", "n", "rows", "readings", "self")
TRACING_KEPT = (
    "model",
    "split",
    "n",
    "given",
    "names",
    "metric",
    "method",
    "patched_pairs",
    "correlation",
    "heat",
    "top",
)
STUDY_FILES = ("study.json", "sinks.json", "patch.json")  # what a study's folder holds, one of them
# A study's entry: (its id's prefix, the record key of its figures, what of the study it keeps, what it measured)
KINDS = {
    "lens": ("lens", "lens", LENS_KEPT, "DecoderLens, the decoder reading each encoder depth"),
    "sinks": ("sinks", "sinks", SINKS_KEPT, "cross-attention's share on `</s>` and punctuation, forced and own"),
    "tracing": ("tracing", "tracing", TRACING_KEPT, "causal tracing: the share each patched slice restores"),
}
SELF_TOO = ", and self-attention's on each query's own position"  # a study of the sinks that measured it
KEYS_AND_VALUES = ("kv-study", "kv_study", KEPT, "the swap and patch studies of keys and values")


def study_file(folder: Path) -> Path | None:
    """The study's file in `folder`, if it is a study's output folder."""
    return next((Path(folder) / name for name in STUDY_FILES if (Path(folder) / name).is_file()), None)


def rounded(value, digits: int = 6):
    """The study's numbers to `digits` significant digits, more than a table shows: the record
    stays small, and a difference of 5e-06 stays 5e-06."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def slug(model: str) -> str:
    """A model's name as an id's part."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def threads_env(result: dict) -> str:
    """The environment a command ran in, as what it recorded says (recorded_with): a thread count
    below the machine's cores was set there."""
    threads = result["threads"]
    return f"OMP_NUM_THREADS={threads} " if threads < (result["machine"]["cores"] or threads) else ""


def command(study: dict, checkpoint: str | None = None) -> str:
    """The command that ran it, its settings as study.json has them (`checkpoint`: what ckpt_path
    is said to be, if not the model's name)."""
    env = threads_env(study)
    if study["study"] == "tracing":
        return patch_command(study, checkpoint, env)
    extra = [f"split={study['split']}"] if study["split"] != DEFAULT_SPLIT else []
    extra += [f"substitutes={study['substitutes']}"] if study.get("substitutes", 5) != DEFAULT_SUBSTITUTES else []
    name = "qkvmt sinks" if study["study"] == "sinks" else f"qkvmt intervene study={study['study']}"
    head = f"{env}{name} ckpt_path={checkpoint or study['model']}"
    return " ".join([head, *extra, f"n={study['n']}"])


def patch_command(study: dict, checkpoint: str | None, env: str) -> str:
    """`qkvmt patch` with the settings its patch.json records that differ from conf/patch.yaml's."""
    names = study["names_given"]
    names = names if isinstance(names, str) else "[" + ",".join(names) + "]"
    settings = [
        f"ckpt_path={checkpoint or study['model']}",
        *(f"{k}={v}" for k, v in study["files"].items()),
        f"'names={names}'" if names != PATCH_DEFAULTS["names"] else "",
        *(f"{k}={study[k]}" for k in ("metric", "method", "unequal") if study[k] != PATCH_DEFAULTS[k]),
    ]
    return " ".join([f"{env}qkvmt patch", *filter(None, settings)])


def measured_on(
    result: dict, hardware: str | None = None, commit=None, conditions=None, disturbed: bool = False
) -> tuple[dict, dict]:
    """(what an entry of a command's result holds of where, when and how it ran, by what the
    result recorded (recorded_with) and what the caller says; the hardware class it needs)."""
    machine = result["machine"]
    hw = machine["hardware"]
    cores = machine["cores"] if hw["device"] == "cpu" else None
    text, cls, label = describe(hw, cores, machine["amx"])
    run = {
        "kind": "measurement",
        "hardware": hardware or text,
        "hardware_class": cls,
        "cores": cores,
        "torch": machine["torch"],
        "threads": result["threads"],
        "date": result["date"],
        "commit": commit,
        "settings_current": True,
        "disturbed": bool(disturbed),
        "how_measured": "command",
    }
    if conditions:
        run["conditions"] = conditions
    return run, {cls: {"cpu": hw["device"] == "cpu", "label": label}}


def entry(
    folder: Path,
    *,
    id: str | None = None,
    hardware: str | None = None,
    commit: str | None = None,
    conditions: str | None = None,
    disturbed: bool = False,
    of: str | None = None,
    taken_ids=(),
) -> tuple[dict, dict]:
    """(entry, the hardware class it needs) for the study in `folder`; `of` names its model in
    the record instead of its checkpoint's path (a training run's id, say), which would name a
    folder of one machine."""
    path = study_file(folder) or Path(folder) / STUDY_FILES[0]
    study = read_json(
        path, "give add= the output folder of a study (qkvmt intervene study=..., qkvmt sinks, qkvmt patch)"
    )
    said = command(study, f"<the checkpoint of {of}>" if of else None)
    study = {**study, "model": of} if of else study
    prefix, key, kept, what = KINDS.get(study["study"], KEYS_AND_VALUES)
    what += SELF_TOO if "self" in study else ""
    measured, classes = measured_on(study, hardware, commit, conditions, disturbed)
    run = {
        "id": id or free_id(f"{prefix}-{slug(study['model'])}", taken_ids),
        **measured,
        "what": f"{what}, {study['model']}, {study['split']}",
        "command": said,
        "figures": [
            {"label": "sentences", "value": study["n"]},
            {"label": "whole command", "value": round(study["wall_s"]), "unit": "s"},
            *({"label": f"{k}, time", "value": round(v), "unit": "s"} for k, v in study["seconds"].items()),
        ],
    }
    run |= {f"{key}_of": study["model"], key: rounded({k: study[k] for k in kept if k in study})}
    return run, classes
