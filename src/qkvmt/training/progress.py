"""Training progress counted in optimizer steps, readable on a terminal and in a log file.

Lightning's bars count batches within an epoch, and our runs are bounded by `max_steps` with
`max_epochs=-1` (its bar read "Epoch 0/-2"); off a terminal they print nothing at all. This bar
counts steps towards whichever limit ends the run first: `max_steps`, or `max_time`, where the
steps the time will hold are estimated from those done so far. On a terminal it is a tqdm bar;
otherwise (a log file, CI) it writes a line every `every_s` seconds, as fairseq's simple log
format does. Validation and test results are lines in both cases.
"""

import logging
import sys
import time

from lightning.pytorch.callbacks import ProgressBar, Timer
from tqdm import tqdm

log = logging.getLogger(__name__)


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def logged(trainer, steps_done: int) -> bool:
    """Whether Lightning hands the loggers the values of the optimizer step that brings training to
    `steps_done` steps: every trainer.log_every_n_steps, counting from 1. Logging reads values
    back from the device, so these are the steps where a GPU's host waits anyway."""
    every = trainer.log_every_n_steps
    return every > 0 and steps_done % every == 0


class StepProgress(ProgressBar):
    def __init__(self, every_s: float = 60.0, interactive: bool | None = None):
        super().__init__()
        self.every_s = every_s
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self._enabled = True
        self.bar: tqdm | None = None
        self._start = self._last_line = self._val_start = 0.0
        self._first_step = 0

    def disable(self) -> None:  # Lightning disables the bar on every rank but rank 0
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args, **kwargs) -> None:
        text = " ".join(map(str, args))
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            log.info(text)

    def on_train_start(self, trainer, pl_module) -> None:
        self._start = self._last_line = time.monotonic()
        self._first_step = trainer.global_step
        if self._enabled and self.interactive:
            total = trainer.max_steps if trainer.max_steps > 0 and _timer(trainer) is None else None
            self.bar = tqdm(
                total=total,
                initial=trainer.global_step,
                desc="train",
                unit="step",
                file=sys.stderr,
                dynamic_ncols=True,
                smoothing=0.05,
            )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if not self._enabled:
            return
        if self.bar is not None:
            self.bar.update(trainer.global_step - self.bar.n)
            if time.monotonic() - self._last_line >= 1.0:  # reading a metric syncs a GPU
                self._last_line = time.monotonic()
                timer = _timer(trainer)
                if timer is not None:  # the steps the time will hold, once it leads
                    self.bar.total = toward_limit(trainer.global_step, trainer.max_steps, _time_fraction(timer))[1]
                self.bar.set_postfix_str(self._metrics(trainer), refresh=False)
        elif time.monotonic() - self._last_line >= self.every_s:
            self._last_line = time.monotonic()
            self.print(self.status(trainer))

    def status(self, trainer) -> str:
        """'step 1200/4400 (27%) · epoch 9 · loss 3.41 · ... · 12m04s elapsed, ~32m left'; under a
        time limit that ends the run before max_steps, 'step 1200/~4400 (27%)' (an estimate)."""
        step, total = trainer.global_step, trainer.max_steps
        elapsed = time.monotonic() - self._start
        timer = _timer(trainer)
        parts = [steps_done(step, total, _time_fraction(timer))]
        parts.append(f"epoch {trainer.current_epoch}")
        metrics = self._metrics(trainer)
        if metrics:
            parts.append(metrics)
        timing = f"{duration(elapsed)} elapsed"
        lefts = []
        done = step - self._first_step
        if total > 0 and done > 0:
            lefts.append(elapsed / done * (total - step))
        if timer is not None:
            lefts.append(max(0.0, timer.time_remaining()))  # the last step may end past max_time
        if lefts:
            timing += f", ~{duration(min(lefts))} left"
        parts.append(timing)
        return " · ".join(parts)

    @staticmethod
    def _metrics(trainer) -> str:
        shown = ("train/loss", "train/lr", "train/tgt_tok_s", "val/bleu")
        m = {k: float(trainer.callback_metrics[k]) for k in shown if k in trainer.callback_metrics}
        parts = []
        if "train/loss" in m:
            parts.append(f"loss {m['train/loss']:.3f}")
        if "train/lr" in m:
            parts.append(f"lr {m['train/lr']:.2e}")
        if "train/tgt_tok_s" in m:  # logged by rank 0 for its own batches; ranks get alike batches
            parts.append(f"{m['train/tgt_tok_s'] * trainer.world_size:,.0f} tgt tok/s")
        if "val/bleu" in m:
            parts.append(f"val BLEU {m['val/bleu']:.2f}")
        return " · ".join(parts)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._val_start = time.monotonic()
        if self.bar is not None and not trainer.sanity_checking:
            self.bar.set_description("validate")

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or not self._enabled:
            return
        if self.bar is not None:
            self.bar.set_description("train")
        m = trainer.callback_metrics
        if "val/bleu" in m:
            self.print(
                f"validation at step {trainer.global_step}: BLEU {float(m['val/bleu']):.2f}, chrF "
                f"{float(m['val/chrf']):.2f}, loss {float(m['val/loss']):.3f} "
                f"({duration(time.monotonic() - self._val_start)})"
            )

    def on_train_end(self, trainer, pl_module) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self._enabled:
            self.print(f"training ended at step {trainer.global_step} after {duration(time.monotonic() - self._start)}")

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _timer(trainer) -> Timer | None:
    """Lightning's Timer when `max_time` is set: it ends training when time runs out."""
    return next((cb for cb in trainer.callbacks if isinstance(cb, Timer) and cb.time_remaining() is not None), None)


def _time_fraction(timer: Timer | None) -> float | None:
    """The part of `max_time` used, on the Timer's clock (which counts validation, and the time
    before a resume)."""
    if timer is None:
        return None
    elapsed = timer.time_elapsed()
    return min(1.0, elapsed / (elapsed + timer.time_remaining()))  # the last step may end past it


def toward_limit(step: int, max_steps: int, time_fraction: float | None) -> tuple[float | None, int | None, bool]:
    """(fraction done, total steps, whether that total is an estimate) towards whichever limit ends
    the run first. The fraction is the larger of step/max_steps and the part of max_time used
    (`time_fraction`, None without a time limit); when time leads, the total is the steps it will
    hold at the pace so far, step / fraction (None before the first step). (None, None, False):
    no limit."""
    by_steps = step / max_steps if max_steps > 0 else 0.0
    by_time = time_fraction or 0.0
    if max_steps > 0 and by_steps >= by_time:
        return by_steps, max_steps, False
    if time_fraction is None:
        return None, None, False
    return by_time, (round(step / by_time) if step > 0 and by_time > 0 else None), True


def steps_done(step: int, max_steps: int, time_fraction: float | None) -> str:
    """'step N/M (P%)' towards whichever limit ends the run first (toward_limit); 'step N/~M (P%)'
    when M is estimated from the time."""
    fraction, total, estimated = toward_limit(step, max_steps, time_fraction)
    if fraction is None:
        return f"step {step}"
    of = "" if total is None else f"/~{total}" if estimated else f"/{total}"
    return f"step {step}{of} ({100 * fraction:.0f}%)"
