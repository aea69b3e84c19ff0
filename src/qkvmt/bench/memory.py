"""A CPU recipe's host memory over training: each process's peak resident set, where the peak
was set, and how fast the resident set grows per 1,000 steps once warm.

The recipe (e.g. multi30k_de_en_cpu) is trained by `qkvmt train` itself, in a process of its
own, for `steps` steps instead of its minutes (`train_overrides`): its processes, precision,
batches, tokenizer training, id caches, validations, test with beam search and host-memory
settings are the training command's, so the peak is the one a run's train_metrics.json records
(`host_memory.peak_rss_mb`), read from there. Nothing the benchmark's own process allocated
counts: each process's peak is the high-water mark of its own address space
(qkvmt.host.process_memory.peak_resident_bytes).

`SampleHostMemory`, added to the run's callbacks, reads each process's resident set every
`every` steps, right after a release of free heap pages (so growth is that of what stays), and
its high-water mark at the end of each phase: setup (imports, tokenizer, id caches, model),
training steps, each validation, the test.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from qkvmt.host.process_memory import (
    MB,
    RSS_READABLE,
    peak_resident_bytes,
    release_freed_host_memory,
    resident_bytes,
)

SAMPLES = "host_memory_rank{rank}.json"  # what SampleHostMemory writes, one file per process
TRAIN = [sys.executable, "-m", "qkvmt", "train"]  # the training command, as a user runs it


def recipe_memory(
    experiment: str, steps: int, every: int, overrides: list[str], paths: list[str] = (), train: list[str] = TRAIN
) -> dict:
    """Runs the training command (`train`: qkvmt train) for `steps` steps of `experiment` in a
    fresh process, its resident set read every `every` steps; `overrides` as on its command line,
    recorded with the result, after `paths` (data.root=...: this machine's folders, not recorded)."""
    if not RSS_READABLE:
        return {"experiment": experiment, "error": "no /proc/self/statm: memory is measured on Linux only"}
    with tempfile.TemporaryDirectory() as out:
        log = Path(out) / "stderr.txt"
        command = [*train, *train_overrides(experiment, out, steps, every), *paths, *overrides]
        with open(log, "w") as f:
            code = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=f).returncode
        if code != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            return {"experiment": experiment, "error": f"qkvmt train exited with {code}: " + " / ".join(tail)}
        return {"experiment": experiment, "overrides": list(overrides), **read_run(Path(out))}


def train_overrides(experiment: str, out: str, steps: int, every: int) -> list[str]:
    """What the measured run changes in the training command: its folder, its length (steps instead
    of the recipe's minutes: the learning rate then falls over those steps), no progress bar,
    and the sampling callback. Everything else is the recipe's."""
    sample = f"{{_target_:{SampleHostMemory.__module__}.SampleHostMemory,every:{every},folder:'{out}'}}"
    return [
        f"experiment={experiment}",
        f"hydra.run.dir={out}",
        f"trainer.max_steps={steps}",
        "trainer.max_time=null",
        "trainer.enable_progress_bar=false",
        f"+callbacks.host_memory_samples={sample}",
    ]


def read_run(out: Path) -> dict:
    """The measured run's figures: train_metrics.json's host memory (as a run records it) and
    the samples of each process."""
    metrics = json.loads((out / "train_metrics.json").read_text())
    run = json.loads((out / "run.json").read_text())
    host = metrics["host_memory"]
    ranks = [json.loads((out / SAMPLES.format(rank=r)).read_text()) for r in range(len(host["peak_rss_mb"]))]
    peaks = host["peak_rss_mb"]
    top = ranks[int(np.argmax(peaks))]
    return {
        "steps": metrics["steps"],
        "processes": len(peaks),
        "precision": metrics["precision"],
        "threads": ranks[0]["threads"],
        "max_tokens": run["data"]["max_tokens"],
        "peak_rss_mb": max(peaks),  # train_metrics.json's host_memory.peak_rss_mb, the largest process
        "peak_rss_mb_per_process": peaks,
        "peak_set_in": peak_phase(top["high_water_mb"]),
        "high_water_mb": [r["high_water_mb"] for r in ranks],
        "rss_mb_at_validation": host["rss_mb_at_step"],
        "rss_mb": ranks[0]["rss_mb"],
        "growth_mb_per_1k_steps": growth_per_1k_steps(ranks[0]["rss_mb"]),
    }


def peak_phase(high_water: list[list], slack_mb: float = 4.0) -> str | None:
    """The phase in which a process's high-water mark reached its final value: `high_water`
    holds [phase, step, MB] at the end of each phase, in order (the mark only rises)."""
    if not high_water:
        return None
    final = high_water[-1][2]
    return next(phase for phase, _, mb in high_water if mb >= final - slack_mb)


def growth_per_1k_steps(samples: list[tuple[int, float]]) -> float | None:
    """MB per 1,000 steps: the least-squares slope over the second half of the samples (the
    first half holds the warm-up: the first batches of each shape, the allocator's first blocks)."""
    late = samples[len(samples) // 2 :]
    if len(late) < 2:
        return None
    steps, mb = np.array(late, dtype=float).T
    return float(np.polyfit(steps, mb, 1)[0] * 1000)


class SampleHostMemory(Callback):
    """Each process's resident set every `every` steps, right after a release of free heap pages,
    and its high-water mark at the end of each phase, written to `folder` (SAMPLES) as they come."""

    def __init__(self, every: int, folder: str):
        self.every, self.folder = every, Path(folder)
        self.rss_mb: list[tuple[int, float]] = []
        self.high_water_mb: list[tuple[str, int, float]] = []

    def _mark(self, trainer, phase: str) -> None:
        self.high_water_mb.append((phase, trainer.global_step, round(peak_resident_bytes() / MB, 1)))
        rank = trainer.global_rank
        record = {"threads": torch.get_num_threads(), "rss_mb": self.rss_mb, "high_water_mb": self.high_water_mb}
        (self.folder / SAMPLES.format(rank=rank)).write_text(json.dumps(record))

    def on_train_start(self, trainer, *args) -> None:
        self._mark(trainer, "setup")

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step % self.every == 0:
            release_freed_host_memory()  # as ReleaseFreedHostMemory does every 50 steps
            self.rss_mb.append((trainer.global_step, round(resident_bytes() / MB, 1)))

    def on_validation_start(self, trainer, *args) -> None:
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._mark(trainer, "training")

    def on_validation_end(self, trainer, *args) -> None:
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._mark(trainer, "validation")

    def on_train_end(self, trainer, *args) -> None:
        self._mark(trainer, "training")

    def on_test_end(self, trainer, *args) -> None:
        self._mark(trainer, "test")
