"""Learning-rate factors (multiplying the optimizer's peak lr), one per training step.

Both warm up linearly to the peak over `warmup_steps`. After it:
- `inverse_sqrt` decays as step^-0.5 (Vaswani et al.), for runs without a fixed end;
- `linear` decays linearly to zero at the end of the run's budget: `trainer.max_steps` or
  `trainer.max_time`, whichever comes first. Under a fixed budget, ending at zero beats
  keeping the lr high (Li et al. 2020, "Budgeted Training"); a time budget lets a slow CPU and a
  fast one both end their own number of steps at lr 0.
"""

from collections.abc import Callable

from qkvmt.errors import UserError

SCHEDULES = ("inverse_sqrt", "linear")


def inverse_sqrt(warmup_steps: int) -> Callable[[int], float]:
    """lr factor: linear warmup to 1 at `warmup_steps`, then warmup^0.5 * step^-0.5."""

    def factor(step: int) -> float:
        step = step + 1
        return min(step / warmup_steps, (warmup_steps / step) ** 0.5)

    return factor


def linear(warmup_steps: int, progress: Callable[[int], float]) -> Callable[[int], float]:
    """lr factor for the step after `done` steps: linear warmup to 1 over `warmup_steps`, then
    linear decay to 0 when `progress(done)` (the fraction of the budget spent, in [0, 1]) reaches 1.

    With a step budget T, progress = done/T and the factor is (T - done)/(T - w), the usual linear
    schedule. With a time budget the total T is not known in advance; estimating it as done/p
    gives done(1 - p)/(done - w p): no state, so a resumed run (Lightning restores its elapsed
    time) continues on the same line.
    """

    def factor(done: int) -> float:
        w = warmup_steps
        if done < w:
            return (done + 1) / w
        p = min(max(progress(done), 0.0), 1.0)
        if done - w * p <= 0:  # no warmup and no step yet
            return 1.0 - p
        return done * (1.0 - p) / (done - w * p)

    return factor


def lr_factor(name: str, warmup_steps: int, progress: Callable[[int], float]) -> Callable[[int], float]:
    if name == "inverse_sqrt":
        return inverse_sqrt(warmup_steps)
    if name == "linear":
        return linear(warmup_steps, progress)
    raise UserError(f"module.lr_schedule={name!r}: use one of {', '.join(SCHEDULES)}")
