"""train(cfg): the function behind scripts/train.py."""

import logging
import time
from pathlib import Path

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from qkvmt.checkpointing import AtomicCheckpointIO, SaveOnInterrupt, last_checkpoint_path
from qkvmt.errors import UserError
from qkvmt.files import write_json
from qkvmt.hardware import choose_precision, detect
from qkvmt.host_memory import keep_freed_host_memory
from qkvmt.progress import StepProgress

log = logging.getLogger(__name__)


def train(cfg: DictConfig) -> dict:
    """Train a model as configured; test the best checkpoint; return the metrics."""
    start = time.time()
    keep_freed_host_memory()
    L.seed_everything(cfg.seed, workers=True)
    out = Path(cfg.paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    hardware = detect(cfg.trainer.accelerator)
    precision, why = choose_precision(cfg.trainer.precision, hardware)
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None] + [SaveOnInterrupt()]
    if cfg.trainer.enable_progress_bar:
        callbacks.append(StepProgress())
    trainer = instantiate(
        cfg.trainer,
        precision=precision,
        callbacks=callbacks,
        logger=[instantiate(c) for c in cfg.logger.values() if c is not None],
        plugins=[AtomicCheckpointIO()],  # a kill or a full disk mid-save never corrupts a checkpoint
    )
    # trainer.precision: what Lightning itself will run
    run = {"experiment": cfg.experiment_name, "precision": trainer.precision, "precision_reason": why, "hardware": hardware.to_dict()}
    if trainer.is_global_zero:
        log.info("run folder: %s", out)
        # An experiment's description says what it trains and for how long (not in train.yaml,
        # whose own keys would override the experiment's).
        log.info("experiment %s: %s", cfg.experiment_name, cfg.get("description") or "(no description)")
        log.info("precision %s: %s", precision, why)
        write_json(out / "run.json", run)

    dm = instantiate(cfg.data)
    tokenizer = dm.load_tokenizer(out / "tokenizer.json")  # an existing run's tokenizer is reused
    model_config = instantiate(cfg.model)(vocab_size=tokenizer.get_vocab_size(), **dm.tokenizer_ids())
    module = instantiate(cfg.module)(
        model_config=model_config, tokenizer=tokenizer, src_lang=dm.src_lang, tgt_lang=dm.tgt_lang
    )
    last = last_checkpoint_path(trainer)
    if cfg.resume == "auto":
        resume = str(last) if last is not None and last.exists() else None
    else:
        resume = cfg.resume  # null: start afresh; or a checkpoint path
    if resume:
        log.info("resuming from %s", resume)
    try:
        trainer.fit(module, datamodule=dm, ckpt_path=resume, weights_only=True)
    except SIGTERMException:  # SaveOnInterrupt has saved last.ckpt
        raise UserError(f"stopped by SIGTERM at step {trainer.global_step}; rerun the same command to resume") from None

    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if trainer.is_global_zero:
        log.info("testing %s on %s (beam %d)", best or "the final weights", dm.splits["test"], module.test_decode.beam_size)
    trainer.test(module, datamodule=dm, ckpt_path=best or None, weights_only=True)
    scores = module.test_scores
    metrics = {
        "test_split": dm.splits["test"],
        "test_bleu": scores["bleu"],
        "test_chrf": scores["chrf"],
        "signatures": scores["signatures"],
        "best_val_bleu": _float(trainer.checkpoint_callback.best_model_score) if best else None,
        "best_checkpoint": best,
        "last_checkpoint": str(last) if last is not None else None,
        "steps": trainer.global_step,
        **run,
        "wall_s": round(time.time() - start, 1),
    }
    if trainer.is_global_zero:
        for lg in trainer.loggers:
            lg.log_hyperparams({"test_bleu_signature": scores["signatures"]["bleu"]})
        write_json(out / "train_metrics.json", metrics)
        log.info("test %s BLEU %.2f (%s)", dm.splits["test"], scores["bleu"], scores["signatures"]["bleu"])
    return metrics


def _float(x):
    return None if x is None else float(x)
