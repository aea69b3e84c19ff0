"""The progress line counts towards whichever limit ends the run first, and the model summary
shows parameters without Lightning's FLOPs column."""

import logging
from types import SimpleNamespace

import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelSummary, Timer
from lightning.pytorch.utilities.model_summary import get_human_readable_count

from qkvmt.training.progress import StepProgress
from qkvmt.training.summary import ParameterSummary
from tests.conftest import compose_train

MAX_TIME_S = 56 * 60  # the CPU recipe's budget


def time_limited_trainer(step: int, max_steps: int, used_s: float | None):
    """A trainer as StepProgress reads it, `used_s` seconds into a 56-minute max_time (None: no
    max_time). The Timer is Lightning's, its time used restored as a resume restores it."""
    callbacks = []
    if used_s is not None:
        timer = Timer(duration={"seconds": MAX_TIME_S})
        timer.load_state_dict({"time_elapsed": {"train": used_s}})
        callbacks.append(timer)
    return SimpleNamespace(
        global_step=step,
        max_steps=max_steps,
        callbacks=callbacks,
        current_epoch=0,
        callback_metrics={},
        world_size=1,
    )


def status(step: int, max_steps: int, used_s: float | None, whole: bool = False) -> str:
    """The progress line's count (or the whole line) at `step`, the first step of this process."""
    progress = StepProgress(interactive=False)
    trainer = time_limited_trainer(0, max_steps, used_s)
    progress.on_train_start(trainer, None)
    trainer.global_step = step
    line = progress.status(trainer)
    return line if whole else line.split(" · ")[0]


def test_a_run_that_time_ends_counts_its_percentage_and_steps_by_time():
    # the CPU recipe: max_steps 20,000 that 56 minutes never reach; 266 steps in its first 3
    used = 3 * 60
    line = status(266, 20000, used)
    assert line != "step 266/20000 (1%)"  # the steps' share, which time makes wrong
    fraction = used / MAX_TIME_S
    assert line == f"step 266/~{round(266 / fraction)} ({100 * fraction:.0f}%)"


def test_the_limit_reached_first_wins():
    # steps ahead of the clock: max_steps ends the run, and is the total
    assert status(1900, 2000, MAX_TIME_S / 2) == f"step 1900/2000 ({100 * 1900 / 2000:.0f}%)"
    # the clock ahead: time ends the run
    assert status(100, 2000, MAX_TIME_S / 2) == "step 100/~200 (50%)"
    # no max_time: the steps alone, as before
    assert status(500, 2000, None) == f"step 500/2000 ({100 * 500 / 2000:.0f}%)"
    # no limit on steps, a limit on time
    assert status(100, -1, MAX_TIME_S / 4) == "step 100/~400 (25%)"
    # no limit at all: no percentage
    assert status(100, -1, None) == "step 100"
    # before the first step there is no pace to estimate the total from
    assert status(0, 20000, MAX_TIME_S / 10) == "step 0 (10%)"
    # the step that crosses max_time ends just past it: all done, nothing (not less) left
    line = status(5010, 20000, MAX_TIME_S + 5, whole=True)
    assert line.startswith("step 5010/~5010 (100%) · ") and line.endswith(", ~0m00s left")


def test_the_terminal_bar_counts_towards_the_time_limit_too():
    progress = StepProgress(interactive=True)
    trainer = time_limited_trainer(0, 20000, MAX_TIME_S / 4)
    progress.on_train_start(trainer, None)
    try:
        assert progress.bar.total is None  # no pace yet
        trainer.global_step = 300
        progress._last_line -= 2  # the bar updates its figures once a second
        progress.on_train_batch_end(trainer, None, None, None, 0)
        assert progress.bar.n == 300 and progress.bar.total == 1200  # a quarter of the time, a quarter of the steps
    finally:
        progress.on_train_end(trainer, None)


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(10, 20)
        self.frozen = torch.nn.Linear(20, 3)
        self.frozen.requires_grad_(False)


def test_the_training_summary_shows_parameters_without_a_flops_column(tmp_path, caplog):
    cfg = compose_train(f"paths.output_dir={tmp_path}")
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    trainer = instantiate(
        cfg.trainer, precision="32-true", callbacks=callbacks, logger=False, default_root_dir=tmp_path
    )
    summaries = [c for c in trainer.callbacks if isinstance(c, ModelSummary)]
    assert [type(c) for c in summaries] == [ParameterSummary]  # Lightning adds none of its own
    module = Tiny()
    trainer.strategy.connect(module)
    module.trainer = trainer
    with caplog.at_level(logging.INFO, logger="qkvmt"):
        summaries[0].on_fit_start(trainer, module)
    (summary,) = [r.getMessage() for r in caplog.records if r.name.startswith("qkvmt")]
    assert "flop" not in summary.lower()
    header = summary.splitlines()[1]
    assert [c.strip() for c in header.split("|")] == ["", "Name", "Type", "Params", "Mode"]
    trainable = sum(p.numel() for p in module.encoder.parameters())
    frozen = sum(p.numel() for p in module.frozen.parameters())
    count = lambda n: get_human_readable_count(n).strip()  # noqa: E731
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in summary.splitlines()[3:5]}
    assert rows == {"encoder": count(trainable), "frozen": count(frozen)}
    totals = {line[10:]: line[:10].strip() for line in summary.splitlines()[6:]}
    assert totals["Trainable params"] == count(trainable)
    assert totals["Non-trainable params"] == count(frozen)
    assert totals["Total params"] == count(trainable + frozen)


def test_summary_can_be_turned_off(tmp_path):
    cfg = compose_train(f"paths.output_dir={tmp_path}", "callbacks.summary=null")
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    trainer = instantiate(
        cfg.trainer, precision="32-true", callbacks=callbacks, logger=False, default_root_dir=tmp_path
    )
    assert not any(isinstance(c, ModelSummary) for c in trainer.callbacks)
