"""train(cfg): the function behind scripts/train.py."""

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from qkvmt.alignment.reference import reference_aligner
from qkvmt.alignment.supervision import AlignmentSupervision
from qkvmt.data.vocabularies import MIN_FREQUENCY, JointBPE, model_sizes, untied
from qkvmt.errors import UserError
from qkvmt.files import atomic_write, write_json
from qkvmt.hf.tokenizer_files import as_text
from qkvmt.host.hardware import choose_precision, detect
from qkvmt.host.process_memory import ONEDNN_CACHE, prepare_host_memory
from qkvmt.loading import average_checkpoints, check_resumable
from qkvmt.model.checkpoint import checkpoint_step, model_weights, recent_checkpoints
from qkvmt.model.config import ModelConfig
from qkvmt.pipeline.train_settings import (
    asked_of_start,
    averaged_count,
    check_compiled_step,
    check_module,
    check_optimized_metric,
    check_trainer,
)
from qkvmt.setting_types import path_text, whole_number
from qkvmt.training.faults import (
    AtomicCheckpointIO,
    ResumeRng,
    SaveOnInterrupt,
    StopOnNonFiniteLoss,
    closing_process_group,
    last_checkpoint_path,
    stop_on_lost_process,
)
from qkvmt.training.host_memory import RecordHostMemory, ReleaseFreedHostMemory, training_need_mb, warn_if_short
from qkvmt.training.init_from import Start, check_start, imported_start, load_start
from qkvmt.training.progress import StepProgress
from qkvmt.training.torch_build import idle_cuda_build

log = logging.getLogger(__name__)
SEED_MOST = 2**32 - 1  # numpy's seeds, which Lightning seeds too, go up to this


def train(cfg: DictConfig) -> dict:
    """Train a model as configured; test the best checkpoint (or an average); return the metrics."""
    start = time.time()
    plan = checked_plan(cfg)
    onednn_cache = prepare_host_memory()  # before any bf16 product; the DDP processes inherit it
    L.seed_everything(cfg.seed, workers=True)
    out = Path(cfg.paths.output_dir)
    hardware = detect(cfg.trainer.accelerator)
    check_compiled_step(cfg.module, cfg.trainer, hardware.device, plan.alignment.on)
    precision, why = choose_precision(cfg.trainer.precision, hardware)
    memory = RecordHostMemory()
    trainer = build_trainer(cfg, precision, memory)
    last = last_checkpoint_path(trainer)
    resume = resume_from(cfg.resume, last, plan.wanted)
    if trainer.is_global_zero:
        log_setup(cfg, out, precision, why)
        if hardware.device == "cpu":
            log_cpu_memory(cfg, plan, precision, onednn_cache, trainer.num_devices)
    out.mkdir(parents=True, exist_ok=True)
    # An existing run's tokenizer is reused, or refused if it was made with other settings,
    # before this run records anything in the folder.
    if plan.start and plan.start.imported:  # its own tokenizer, whose files the run folder keeps
        tokenizer = plan.dm.imported_tokenizer(plan.start.tokenizer(), plan.start.tokenizer_files, plan.wanted, out)
    else:
        tokenizer = plan.dm.load_tokenizer(out / "tokenizer.json", given=plan.start.tokenizer() if plan.start else None)
    # trainer.precision: what Lightning itself will run
    run = {
        "experiment": cfg.experiment_name,
        "precision": trainer.precision,
        "precision_reason": why,
        "hardware": hardware.to_dict(),
    }
    if plan.start:
        run["init_from"] = plan.start.record()
    # the data as this run read it, paths resolved: align.py's reference aligner reads it again
    data_config = {"data": OmegaConf.to_container(cfg.data, resolve=True)}
    if trainer.is_global_zero:
        write_json(out / "run.json", run | data_config)
    module = build_module(cfg, plan, tokenizer)
    if plan.start and not resume:  # a resumed run continues from its own checkpoint instead
        plan.start.load_into(module.model)
        if trainer.is_global_zero:
            log.info("starting from the weights of %s (init_from): new optimizer, schedule, steps", plan.start.path)
    # the process group closed however the run ends; a node or rank that dies: one line on the others
    with closing_process_group(), stop_on_lost_process(trainer):
        fit(trainer, module, plan.dm, resume)
        metrics = run_test(trainer, module, plan.dm, last, plan.n_average)
        host_memory = memory.summary(trainer)  # collective: every rank
    parameters = sum(p.numel() for p in module.model.parameters())
    metrics |= {"steps": trainer.global_step, "parameters": parameters, **run, "host_memory": host_memory}
    metrics["wall_s"] = round(time.time() - start, 1)
    if trainer.is_global_zero:
        for lg in trainer.loggers:
            lg.log_hyperparams({"test_bleu_signature": metrics["signatures"]["bleu"]})
        write_json(out / "train_metrics.json", metrics)
        log.info("test %s BLEU %.2f (%s)", metrics["test_split"], metrics["test_bleu"], metrics["signatures"]["bleu"])
    return metrics


class Plan(NamedTuple):
    """What the configuration makes before anything is written."""

    n_average: int  # 0: test the best checkpoint; N: the average of the last N
    dm: L.LightningDataModule
    model_partial: Callable[..., ModelConfig]  # the model's config, given its vocabulary
    wanted: ModelConfig  # as the data's vocabulary size makes it: what a resumed checkpoint must match
    alignment: AlignmentSupervision
    start: Start | None  # init_from: the model whose weights and tokenizer the run starts from


def checked_plan(cfg: DictConfig) -> Plan:
    """The whole configuration, checked before anything is written: a mistake must not leave a
    run folder (or a tokenizer) that the next run in the same folder would reuse."""
    n_average = averaged_count(cfg.test_checkpoint)  # a typo must not wait for the end of training
    whole_number("seed", cfg.seed, least=0, most=SEED_MOST)
    check_optimized_metric(cfg.optimized_metric)
    check_trainer(cfg.trainer)
    check_module(cfg.module)
    alignment = instantiate(cfg.module.alignment)
    dm = instantiate(
        cfg.data, alignment_links=alignment.labels if alignment.weight else None, aligner=alignment.aligner
    )  # checks data.*
    model_partial = instantiate(cfg.model)
    start = load_start(cfg.init_from)
    if start is not None and not isinstance(dm.vocabulary, JointBPE):
        raise UserError(
            f"init_from={cfg.init_from} brings its own tokenizer, so data.tokenizer cannot take effect: leave "
            "data.tokenizer out, or train from scratch without init_from"
        )
    if start is not None and dm.min_frequency != MIN_FREQUENCY:
        raise UserError(
            f"init_from={cfg.init_from} brings its own tokenizer, so data.min_frequency={dm.min_frequency} cannot "
            "take effect: leave data.min_frequency out, or train from scratch without init_from"
        )
    if start is not None and start.imported:  # the model's own settings, the run's dropout
        start, wanted = imported_start(start, asked_of_start(cfg.model), dm)
    else:
        wanted = model_partial(vocab_size=dm.vocab_size, **untied(dm.vocabulary))  # ModelConfig checks model.*
    alignment = alignment.validated(wanted.decoder_layers, wanted.n_heads)
    if alignment.on:
        reference_aligner(alignment.aligner, alignment.labels, "module.alignment.aligner")
    if start is not None and not start.imported:
        check_start(start, wanted, dm.src_lang, dm.tgt_lang)
    return Plan(n_average, dm, model_partial, wanted, alignment, start)


def build_trainer(cfg: DictConfig, precision: str, memory: RecordHostMemory) -> L.Trainer:
    """The Lightning Trainer as configured, with the callbacks every run has."""
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    callbacks += [SaveOnInterrupt(), ResumeRng(), StopOnNonFiniteLoss(), ReleaseFreedHostMemory(), memory]
    if cfg.trainer.enable_progress_bar:
        callbacks.append(StepProgress())
    return instantiate(
        cfg.trainer,
        precision=precision,
        callbacks=callbacks,
        logger=[instantiate(c) for c in cfg.logger.values() if c is not None],
        plugins=[AtomicCheckpointIO()],  # a kill or a full disk mid-save never corrupts a checkpoint
    )


def resume_from(setting: str | None, last: Path | None, wanted: ModelConfig) -> str | None:
    """The checkpoint to resume from (`resume`: auto, a path, or null to start afresh), checked
    against the model this run wants."""
    if setting == "auto":
        resume = str(last) if last is not None and last.exists() else None
    else:
        resume = path_text(setting)  # null: start afresh; or a checkpoint path (resume=0 names a file too)
    if resume and not Path(resume).exists():  # load_checkpoint's own words would name ckpt_path
        raise UserError(
            f"resume={resume}: no such checkpoint; give a .ckpt file of this run, auto (its last), or null to start "
            "afresh"
        )
    if resume:
        check_resumable(Path(resume), wanted.to_dict())
    return resume


def log_setup(cfg: DictConfig, out: Path, precision: str, why: str) -> None:
    """The first lines of a run's log: where it writes, what it runs, in which precision and why."""
    log.info("run folder: %s", out)
    log.info("experiment %s: %s", cfg.experiment_name, cfg.description or "(no description)")
    log.info("precision %s: %s", precision, why)


def log_cpu_memory(cfg: DictConfig, plan: Plan, precision: str, onednn_cache: int, devices: int) -> None:
    """On a CPU: how bf16 products are kept few, a CUDA build's idle libraries, and whether the
    host's memory looks short for this run."""
    if precision == "bf16-mixed":
        rows = cfg.module.linear_row_multiple
        padded = f"padded to a multiple of {rows}, so that oneDNN builds few primitives" if rows > 1 else "not padded"
        log.info(
            "bf16 products: linear layers' rows %s (module.linear_row_multiple); oneDNN keeps up to %d (%s)",
            padded,
            onednn_cache,
            ONEDNN_CACHE,
        )
    idle = idle_cuda_build()
    if idle:
        log.info(idle)
    short = warn_if_short(training_need_mb(plan.wanted, plan.dm.max_tokens, cfg.module.loss_chunk_rows), devices)
    if short:
        log.warning(short)


def build_module(cfg: DictConfig, plan: Plan, tokenizer):
    """The LightningModule, its model sized by the run's tokenizer (an imported model's: as it is)."""
    module = instantiate(cfg.module)
    more = {}
    if plan.start and plan.start.imported:
        model_config = plan.wanted
        more = plan.start.module_settings(module.keywords["val_decode"], module.keywords["test_decode"])
    else:
        if plan.dm.vocabulary.separate:
            log.info("data.tokenizer: a vocabulary per language, so the model's embeddings are its own per side")
        model_config = plan.model_partial(**model_sizes(tokenizer, plan.dm.vocabulary))
        if plan.dm.tokenizer_files is not None:  # kept in every checkpoint, as an imported model's are
            more = {"tokenizer_files": as_text(plan.dm.tokenizer_files)}
    return module(
        model_config=model_config,
        tokenizer=tokenizer,
        src_lang=plan.dm.src_lang,
        tgt_lang=plan.dm.tgt_lang,
        alignment=plan.alignment,
        **more,
    )


def fit(trainer: L.Trainer, module, dm, resume: str | None) -> None:
    """Train, from `resume` where given; a SIGTERM ends it as a one-line error."""
    if resume:
        log.info("resuming from %s", resume)
    try:
        trainer.fit(module, datamodule=dm, ckpt_path=resume, weights_only=True)
    except SIGTERMException:  # SaveOnInterrupt has saved last.ckpt
        raise UserError(f"stopped by SIGTERM at step {trainer.global_step}; rerun the same command to resume") from None


def run_test(trainer: L.Trainer, module, dm, last: Path | None, n_average: int) -> dict:
    """Test the best checkpoint, or the average of the last n_average: the scores, and which
    checkpoints they are of."""
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    tested, averaged = best or None, []
    if n_average and last is not None:
        tested, averaged = average_for_test(module, last, n_average, write=trainer.is_global_zero)
    if trainer.is_global_zero:
        log.info(
            "testing %s on %s (beam %d)", tested or "the final weights", dm.splits["test"], module.test_decode.beam_size
        )
    # An average is already in the module: test it as it is (ckpt_path=None).
    trainer.test(module, datamodule=dm, ckpt_path=None if averaged else tested, weights_only=True)
    scores = module.test_scores
    return {
        "test_split": dm.splits["test"],
        "test_bleu": scores["bleu"],
        "test_chrf": scores["chrf"],
        "signatures": scores["signatures"],
        "best_val_bleu": _float(trainer.checkpoint_callback.best_model_score) if best else None,
        "best_checkpoint": best,
        "test_checkpoint": str(tested) if tested else None,
        "averaged_from": [str(p) for p in averaged],
        "last_checkpoint": str(last) if last is not None else None,
    }


def train_command(cfg: DictConfig) -> float | None:
    """scripts/train.py: train, and give Hydra's sweepers `optimized_metric` (null: nothing)."""
    return optimized_value(train(cfg), cfg.optimized_metric)


def optimized_value(metrics: dict, name: str | None) -> float | None:
    """The metric a Hydra sweeper optimizes (`optimized_metric`), from train()'s metrics."""
    check_optimized_metric(name)
    return None if name is None or metrics[name] is None else float(metrics[name])


def average_for_test(module, last: Path, n: int, write: bool) -> tuple[Path, list[Path]]:
    """Load into `module` the average of the final weights (last.ckpt) and the most recent step
    checkpoints before them, n in all. Every rank averages the same files itself, so none waits
    for another's write; rank 0 (`write`) also saves the average beside them, as
    checkpoints/averaged_lastN.ckpt, for evaluate.py and align.py."""
    steps = {}  # global step -> file; last.ckpt is the newest, and may repeat a step checkpoint
    for path in [*recent_checkpoints(last.parent, n), last]:
        steps[checkpoint_step(path)] = path
    paths = [steps[s] for s in sorted(steps)[-n:]]
    ckpt = average_checkpoints(paths)
    module.model.load_state_dict(model_weights(ckpt))
    out = last.parent / f"averaged_last{n}.ckpt"
    if write:
        atomic_write(out, lambda f: torch.save(ckpt, f))
    return out, paths


def _float(x):
    return None if x is None else float(x)
