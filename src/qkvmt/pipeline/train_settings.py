"""The settings of qkvmt train that would otherwise fail deep in a run, late, or silently: each
checked before anything is written, a mistake refused in one line naming it."""

import logging

from omegaconf import DictConfig, OmegaConf

from qkvmt.errors import UserError
from qkvmt.model.checkpoint import last_n
from qkvmt.model.loss import ROW_MULTIPLE
from qkvmt.training.compiled import check_compile
from qkvmt.training.init_from import MAY_DIFFER

log = logging.getLogger(__name__)

OPTIMIZABLE = ("test_bleu", "test_chrf", "best_val_bleu", "wall_s")  # numbers train() returns


def check_optimized_metric(name: str | None) -> None:
    if name is not None and name not in OPTIMIZABLE:
        raise UserError(f"optimized_metric={name}: use one of {', '.join(OPTIMIZABLE)} (or null)")


def check_module(m: DictConfig) -> None:
    """The module's row settings, which would otherwise fail deep in a step, or silently."""
    chunk, multiple = m.loss_chunk_rows, m.linear_row_multiple
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < ROW_MULTIPLE or chunk % ROW_MULTIPLE:
        raise UserError(
            f"module.loss_chunk_rows={chunk!r}: give a positive multiple of {ROW_MULTIPLE} "
            f"(the loss takes its rows {ROW_MULTIPLE} at a time)"
        )
    if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 0:
        raise UserError(f"module.linear_row_multiple={multiple!r}: give a whole number of rows, or 0 for no padding")


def check_trainer(t: DictConfig) -> None:
    """The step settings Lightning would reject with a traceback, as one line each."""
    for name in ("max_steps", "max_epochs"):
        value = t.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1)):
            raise UserError(f"trainer.{name}={value!r}: give a positive whole number, or -1 for no limit")


def check_compiled_step(m: DictConfig, t: DictConfig, device: str, supervised: bool) -> None:
    """module.compile and module.compile_mode on this device (qkvmt.training.compiled), with the
    trainer's gradient accumulation; an alignment-supervised step (`supervised`) is not compiled."""
    check_compile(m.compile, m.compile_mode, device, "module.", t.get("accumulate_grad_batches") or 1)
    if supervised and m.compile:
        raise UserError(
            "module.compile=true: an alignment-supervised step (module.alignment.weight > 0) is not compiled; "
            "drop module.compile"
        )


def averaged_count(spec: str) -> int:
    """0 for test_checkpoint=best, N for lastN."""
    if str(spec) == "best":
        return 0
    n = last_n(spec)
    if n is not None:
        return n
    raise UserError(
        f"test_checkpoint={spec}: use best, or lastN (e.g. last5) to test the average of the last N checkpoints"
    )


def asked_of_start(model: DictConfig) -> dict:
    """The model.* settings a run asks of an imported model it starts from (init_from).

    With model=init_from on the command line, only the model.* settings typed there, and the
    regularization (dropout), which the experiment may set: an experiment's other model.* settings
    (the CPU recipe's d_model and rotary positions) describe the model it trains from scratch, not
    the one init_from names. Elsewhere (another model group, or a config composed in Python), every
    model.* setting is asked for, and must agree with the model's."""
    from hydra.core.hydra_config import HydraConfig

    given = OmegaConf.to_container(model, resolve=True)
    given = {k: v for k, v in given.items() if not k.startswith("_") and v is not None}
    if not HydraConfig.initialized() or HydraConfig.get().runtime.choices.get("model") != "init_from":
        return given
    typed = {o.lstrip("+~").partition("=")[0] for o in HydraConfig.get().overrides.task}
    asked = {k: v for k, v in given.items() if f"model.{k}" in typed or k in MAY_DIFFER}
    if left := sorted(given.keys() - asked.keys()):
        log.info(
            "model=init_from: the model is init_from's, so the experiment's %s do not apply",
            ", ".join(f"model.{k}={given[k]}" for k in left),
        )
    return asked
