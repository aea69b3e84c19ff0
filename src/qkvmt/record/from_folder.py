"""A record entry from a training run's folder: what train.py wrote there (train_metrics.json, with
the experiment, precision, hardware, steps, wall time, test scores and memory), the overrides
and seed Hydra kept (.hydra/), and, where given, the test scores of an evaluate.py folder
(metrics.json) instead of the training command's own.

A run folder does not say how many cores the machine had or which torch it ran; where the run's
hardware is this machine's, they are read here, else they must be given."""

import datetime
import json
import os
import re
from pathlib import Path

from omegaconf import OmegaConf

from qkvmt.errors import UserError
from qkvmt.record import settings
from qkvmt.record.markdown import train_command

# Overrides that say where a run read and wrote, not what it computed: left out of the recipe.
PLACES = ("data.root=", "data.cache_dir=", "paths.", "hydra.", "resume=")


def read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise UserError(f"{path} not found: {what}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON ({e})") from None


def hydra_record(folder: Path) -> tuple[list[str], list[str], int | None, dict]:
    """The command line's overrides that change what is computed (the seed apart: runs of one
    recipe with other seeds are one group), the same with the seed for the command, the seed the
    run used and its settings (qkvmt.record.settings), from what Hydra kept in <run>/.hydra/."""
    hydra = folder / ".hydra"
    if not (hydra / "config.yaml").is_file():
        raise UserError(f"{hydra / 'config.yaml'} not found: give add= a folder that qkvmt train made (hydra.run.dir)")
    given = (
        OmegaConf.to_container(OmegaConf.load(hydra / "overrides.yaml")) if (hydra / "overrides.yaml").is_file() else []
    )
    config = OmegaConf.load(hydra / "config.yaml")
    command = [o for o in given or [] if not o.lstrip("+~").startswith(("experiment=", *PLACES))]
    return (
        [o for o in command if not o.startswith("seed=")],
        command,
        OmegaConf.select(config, "seed", default=None),
        settings.pick(config),
    )


def free_id(base: str, taken) -> str:
    n = 1
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def cpu_words(name: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\((R|TM|tm|r)\)", "", name)).strip()


def describe(hw: dict, cores: int | None, amx: bool | None) -> tuple[str, str, str]:
    """(hardware text, hardware class, the class's label) for a run's recorded hardware."""
    if hw["device"] != "cpu":
        slug = re.sub(r"[^a-z0-9]+", "-", hw["name"].lower()).strip("-")
        return f"1 {hw['name']}", f"gpu-{slug}", f"1 {hw['name']}"
    name = cpu_words(hw["name"])
    if hw["cpu_native_bf16"]:
        what = " with AMX (AVX512-BF16)" if amx else " with AVX512-BF16" + (", no AMX" if amx is False else "")
        cls, label = "cpu-bf16", "native bf16 (AMX or AVX512-BF16)"
    else:
        what = f", {hw['cpu_capability']} without native bf16"
        cls, label = f"cpu-{hw['cpu_capability'].lower()}", f"{hw['cpu_capability']} only (float32)"
    article = "an" if name[:1].upper() in "AEIOU" else "a"
    return f"{cores} cores of {article} {name}{what}", cls, label


def scores_of(metrics: dict, evaluation: Path | None) -> tuple[dict, str]:
    """The test figures and the method that measured them."""
    if evaluation is None:
        sig = metrics["signatures"]
        return {
            "split": metrics["test_split"],
            "bleu": round(metrics["test_bleu"], 2),
            "chrf": round(metrics["test_chrf"], 2),
            "signatures": {"bleu": sig["bleu"], "chrf": sig["chrf"]},
        }, "train"
    ev = read_json(evaluation / "metrics.json", "give evaluation= an output folder of qkvmt evaluate")
    keys = [k for k in ("bleu", "chrf", "bleu_tok_lc") if k in ev]
    return {
        "split": ev["source"],
        **{k: round(ev[k], 2) for k in keys},
        "signatures": {k: ev["signatures"][k] for k in keys},
    }, "evaluate"


def machine_of(folder: Path, hw: dict, this_machine: dict, cores: int | None, torch: str | None) -> dict:
    """What the run folder does not say of the machine (CPU cores, None on a GPU; torch; AMX):
    as given, else this machine's where the run's hardware is this machine's; a CPU run's cores
    must be known."""
    same = this_machine["hardware"] == hw
    cores = cores or (this_machine["cores"] if same else None)
    if hw["device"] == "cpu" and cores is None:
        raise UserError(f"{folder} was trained on another machine ({hw['name']}): give cores=N, the CPU cores it had")
    return {
        "cores": cores if hw["device"] == "cpu" else None,
        "torch": torch or (this_machine["torch"] if same else None),
        "amx": this_machine["amx"] if same else None,
    }


def entry(
    folder: Path,
    this_machine: dict,
    *,
    id: str | None = None,
    hardware: str | None = None,
    cores: int | None = None,
    torch: str | None = None,
    commit: str | None = None,
    conditions: str | None = None,
    disturbed: bool = False,
    evaluation: Path | None = None,
    taken_ids=(),
) -> tuple[dict, dict]:
    """(entry, the hardware class it needs) for the run in `folder`.

    this_machine: {"hardware": qkvmt.host.hardware.Hardware.to_dict(), "cores", "amx", "torch"}
    of the machine reading the folder; used only where the run's hardware is the same."""
    folder = Path(folder)
    metrics = read_json(
        folder / "train_metrics.json",
        "give add= the folder of a training run that finished (qkvmt train writes this after its test)",
    )
    hw = metrics["hardware"]
    machine = machine_of(folder, hw, this_machine, cores, torch)
    text, cls, label = describe(hw, machine["cores"], machine["amx"])
    overrides, on_command_line, seed, ran_with = hydra_record(folder)
    experiment = metrics["experiment"]
    test, how = scores_of(metrics, Path(evaluation) if evaluation else None)
    when = datetime.datetime.fromtimestamp(os.path.getmtime(folder / "train_metrics.json"), datetime.timezone.utc)
    run = {
        "id": id or free_id(experiment, taken_ids),
        "kind": "train",
        "experiment": experiment,
        "overrides": overrides,
        "settings": ran_with,
        "command": train_command(experiment, on_command_line),
        "hardware": hardware or text,
        "hardware_class": cls,
        "cores": machine["cores"],
        "precision": metrics.get("precision"),
        "torch": machine["torch"],
        "seed": seed,
        "date": when.date().isoformat(),
        "commit": commit,
        "settings_current": True,  # until compared: scripts/results.py
        "disturbed": bool(disturbed),
        "how_measured": how,
        "steps": metrics["steps"],
        "wall_s": round(metrics["wall_s"]),
        "test": test,
    }
    if conditions:
        run["conditions"] = conditions
    if "parameters" in metrics:
        run["parameters"] = metrics["parameters"]
    peak = metrics.get("host_memory", {}).get("peak_rss_mb")
    if peak:
        run["peak_rss_mib"] = peak
    return run, {cls: {"cpu": hw["device"] == "cpu", "label": label}}
