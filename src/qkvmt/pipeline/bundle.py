"""bundle(cfg): a finished training run as a model that ships with qkvmt (qkvmt.bundled).

The weights the run tested (its best checkpoint, or the average it tested) are stored as a
safetensors model folder in `dtype` (half precision halves the size), the stored folder is
scored again on the run's test split with the run's own decoding, and qkvmt.json records
both scores beside the recipe, command, commit, machine, steps and time. The test that keeps
the bundled models honest decodes the split again and compares with the stored folder's score.
"""

import json
import os
import platform
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import StagedFolder, check_new_output
from qkvmt.model.weights_folder import add_provenance, write_weights_folder
from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.text.metrics import score


def bundle(cfg: DictConfig) -> dict:
    run = Path(cfg.run_dir)
    trained, record = read_run(run)
    target = Path(cfg.bundle_dir) / cfg.name
    check_new_output(target, "name", folder=True)
    tested = [Path(p) for p in trained["averaged_from"]] or [Path(trained["test_checkpoint"])]
    model = Model.from_checkpoints(tested, instantiate(cfg.fabric))
    with StagedFolder(target.parent, cfg.name, final=lambda: target) as out:
        write_weights_folder(model.transformer, model.tokenizer, model.meta, out, cfg.dtype)
        stored = Model.from_checkpoints([out], model.fabric)
        src, refs, split = read_inputs(cfg, stored.meta, tested[0])
        start = time.time()
        scores = score(stored.translate(src, progress=True), refs)
        provenance = {
            "experiment": record["experiment"],
            "command": " ".join(["qkvmt train", *overrides(run)]),
            "commit": cfg.commit,
            "seed": record["data"]["seed"],
            "machine": machine(record["hardware"]),
            "torch": torch.__version__,
            "precision": record["precision"],
            "steps": trained["steps"],
            "train_wall_s": trained["wall_s"],
            "run": {
                "test_bleu": trained["test_bleu"],
                "test_chrf": trained["test_chrf"],
                "signatures": trained["signatures"],
            },
            "test": {
                "split": split,
                "n": len(src),
                "bleu": round(scores["bleu"], 2),
                "chrf": round(scores["chrf"], 2),
                "signatures": scores["signatures"],
                "decode": stored.meta.decode,
                "decode_s": round(time.time() - start, 1),
            },
            "dtype": cfg.dtype,
            "bundled": time.strftime("%Y-%m-%d"),
        }
        if "init_from" in record:  # the model it started from, with that model's own provenance
            provenance["init_from"] = record["init_from"]
        add_provenance(out, provenance)
    print(
        f"bundled {run} as {cfg.name} ({cfg.dtype}) in {target}: {split} BLEU {scores['bleu']:.2f} "
        f"(the run's own weights: {trained['test_bleu']:.2f}), chrF {scores['chrf']:.2f}"
    )
    return {"name": cfg.name, "folder": str(target), **provenance["test"]}


def read_run(run: Path) -> tuple[dict, dict]:
    """train_metrics.json and run.json of a finished run, or a UserError saying what is missing."""
    found = []
    for name in ("train_metrics.json", "run.json"):
        path = run / name
        if not path.is_file():
            raise UserError(
                f"run_dir={run} has no {name}: give the folder of a training run that finished (it writes {name})"
            )
        found.append(json.loads(path.read_text(encoding="utf-8")))
    return found[0], found[1]


def overrides(run: Path) -> list[str]:
    """The command line's overrides, as Hydra recorded them in the run's .hydra/overrides.yaml,
    without where the run wrote (hydra.run.dir): the recipe is the same wherever it runs."""
    path = run / ".hydra" / "overrides.yaml"
    given = OmegaConf.to_container(OmegaConf.load(path)) if path.is_file() else []
    return [o for o in given if not o.startswith("hydra.")]


def machine(hardware: dict) -> dict:
    """The machine class the run trained on, as figures are labelled: cores, CPU and capability."""
    cores = os.cpu_count()
    bf16 = "native bf16" if hardware.get("cpu_native_bf16") else "no native bf16"
    what = (
        f"{cores} cores, {hardware['name']} ({hardware['cpu_capability']}, {bf16})"
        if hardware["device"] == "cpu"
        else hardware["name"]
    )
    return {"summary": what, "cores": cores, "platform": platform.platform(), **hardware}
