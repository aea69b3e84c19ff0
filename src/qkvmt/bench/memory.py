"""A CPU recipe's host memory over training: one process's peak resident set, and how fast it
grows per 1,000 steps once warm.

The recipe (e.g. multi30k_de_en_cpu) is composed as scripts/train.py composes it and trained by
Lightning, in its precision, with its batches and its host-memory settings: the share of one of
its processes, on as many threads as each of its processes gets. It runs in a fresh process, so
nothing that the benchmark's other stages allocated or cached (oneDNN keeps primitives
process-wide) counts. Validation is left out: it decodes in float32 and repeats the same batches
every time, so what a run's validations add shows in its train_metrics.json instead
(`host_memory.rss_mb_at_step`; there sacreBLEU's memo of scored lines showed).
Readings at multiples of 50 steps come right after a release of free heap pages
(qkvmt.training.host_memory), so their growth is that of what stays; the peak is the high-water mark.
"""

import multiprocessing
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from qkvmt.text.tokenizer import Specials
from qkvmt.training.host_memory import (
    MB,
    RSS_READABLE,
    ReleaseFreedHostMemory,
    peak_resident_bytes,
    prepare_host_memory,
    resident_bytes,
)


def recipe_memory(conf_dir: str, experiment: str, steps: int, every: int, overrides: list[str]) -> dict:
    """Trains `steps` steps of `experiment` (from train.yaml in `conf_dir`) in a fresh process,
    reading its resident set every `every` steps; `overrides` as on train.py's command line.
    The tokenizer and the id caches are made first, in a process of their own: BPE training
    would otherwise set the measured process's high-water mark before its first step."""
    if not RSS_READABLE:
        return {"experiment": experiment, "error": "no /proc/self/statm: memory is measured on Linux only"}
    spawn = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as out:
        args = (conf_dir, experiment, out, list(overrides))
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            pool.submit(_prepare, *args).result()
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
            return pool.submit(_measure, *args, steps, every).result()


def growth_per_1k_steps(samples: list[tuple[int, float]]) -> float | None:
    """MB per 1,000 steps: the least-squares slope over the second half of the samples (the
    first half holds the warm-up: the first batches of each shape, the allocator's first blocks)."""
    late = samples[len(samples) // 2 :]
    if len(late) < 2:
        return None
    steps, mb = np.array(late, dtype=float).T
    return float(np.polyfit(steps, mb, 1)[0] * 1000)


def _compose(conf_dir: str, experiment: str, out: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        return compose("train", overrides=[f"experiment={experiment}", f"paths.output_dir={out}", *overrides])


def _data(cfg, out: str):
    """The recipe's DataModule and tokenizer, as train.py makes them (the first call trains the
    tokenizer and builds the id caches; later ones read them)."""
    from hydra.utils import instantiate

    dm = instantiate(cfg.data, alignment_links=None)
    tokenizer = dm.load_tokenizer(Path(out) / "tokenizer.json")
    dm.prepare_data()
    return dm, tokenizer


def _prepare(conf_dir: str, experiment: str, out: str, overrides: list[str]) -> None:
    _data(_compose(conf_dir, experiment, out, overrides), out)


def _measure(conf_dir: str, experiment: str, out: str, overrides: list[str], steps: int, every: int) -> dict:
    import lightning as L
    import torch
    from hydra.utils import instantiate
    from lightning.pytorch.callbacks import Callback

    from qkvmt.training.hardware import choose_precision, detect

    samples: list[tuple[int, float]] = []

    class Sample(Callback):
        def on_train_batch_end(self, trainer, *args) -> None:
            if trainer.global_step % every == 0:
                samples.append((trainer.global_step, resident_bytes() / MB))

    cfg = _compose(conf_dir, experiment, out, overrides)
    prepare_host_memory()  # as training does
    processes = cfg.trainer.devices if isinstance(cfg.trainer.devices, int) else 1
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))  # as Lightning gives each DDP process
    L.seed_everything(cfg.seed)
    dm, tokenizer = _data(cfg, out)
    model_config = instantiate(cfg.model)(
        vocab_size=tokenizer.get_vocab_size(), **Specials.of(tokenizer).config_fields()
    )
    module = instantiate(cfg.module)(model_config=model_config, tokenizer=tokenizer, alignment=None)
    precision, _ = choose_precision(cfg.trainer.precision, detect("cpu"))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        precision=precision,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ReleaseFreedHostMemory(), Sample()],
        use_distributed_sampler=False,  # as train.py's
    )
    trainer.fit(module, datamodule=dm)
    return {
        "experiment": experiment,
        "steps": steps,
        "precision": precision,
        "threads": torch.get_num_threads(),
        "max_tokens": cfg.data.max_tokens,
        "peak_rss_mb": peak_resident_bytes() / MB,
        "rss_mb": samples,
        "growth_mb_per_1k_steps": growth_per_1k_steps(samples),
    }
