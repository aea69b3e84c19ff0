"""Training that survives kills, full disks, Ctrl-C and NaN, and resumes exactly: Lightning
plugins and callbacks, so the LightningModule holds only the model's own work.

- AtomicCheckpointIO writes each checkpoint to a temporary file in the same folder, fsyncs it
  and renames it over the target, so a kill or a full disk mid-save leaves the previous file
  whole. A save that fails is a one-line error naming the file. It reads checkpoints with
  qkvmt.loading.load_checkpoint.
- SaveOnInterrupt turns Ctrl-C (SIGINT) and SIGTERM (pre-emption) into a stop after the current
  step with checkpoints/last.ckpt saved, so rerunning the same command resumes where it stopped.
- ResumeRng saves every rank's dropout RNG with each checkpoint and restores it just before the
  first resumed step. (The data position is the DataModule's own state: qkvmt.data.datamodule.)
- StopOnNonFiniteLoss stops at a NaN or infinite loss before any validation or checkpoint holds
  an update made after it, on every rank, without making a GPU step wait.
- stop_on_lost_process turns torch.distributed's error when another process of the run dies
  (another node, or another rank) into one line that says so and how to resume.
- closing_process_group destroys the process group DDP formed when the run ends, so that a
  finished run exits cleanly.
"""

import logging
import re
import signal
from contextlib import contextmanager
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from qkvmt.errors import UserError
from qkvmt.files import atomic_write
from qkvmt.loading import load_checkpoint
from qkvmt.training.progress import logged

log = logging.getLogger(__name__)


class CheckpointWriteError(UserError):
    """A checkpoint could not be written (disk full, read-only folder)."""


class AtomicCheckpointIO(TorchCheckpointIO):
    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict:
        # The project's loader: weights_only always, and a missing, corrupt or code-carrying
        # file is a one-line error, when resuming as when testing the best checkpoint.
        return load_checkpoint(path)

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda f: torch.save(checkpoint, f))
        except OSError as e:
            raise CheckpointWriteError(
                f"cannot write checkpoint {path} ({e.strerror or e}): free disk space or make {path.parent} "
                "writable, then rerun the same command; the checkpoints already there are intact"
            ) from None


class SaveOnInterrupt(Callback):
    """Ctrl-C (SIGINT) or SIGTERM during training: finish the current step, save last.ckpt, stop.

    Stopping at a step boundary, where Lightning itself saves, keeps the saved step, data
    position and validation schedule consistent; a second signal stops at once, unsaved.
    After training, last.ckpt is also brought up to the final step (max_steps or max_time may
    end training between two validations, where ModelCheckpoint writes it).
    """

    def __init__(self):
        self.signal: int | None = None
        self._previous: dict = {}
        self._saved_step: int | None = None  # the step of the newest checkpoint this run wrote

    def on_train_start(self, trainer, pl_module) -> None:
        # After Lightning's own SIGTERM handler is installed, so this one takes precedence.
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._request_stop)

    def _request_stop(self, signum, frame) -> None:
        self.signal = signum
        self._restore_handlers()
        again = " (Ctrl-C again stops at once, unsaved)" if signum == signal.SIGINT else ""
        log.warning("%s: stopping after this step%s", signal.Signals(signum).name, again)

    def _restore_handlers(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        # Every rank stops at the same step (one of them may have seen the signal a step later).
        if trainer.strategy.reduce_boolean_decision(self.signal is not None, all=False):
            self._save_and_stop(trainer)

    def _save_and_stop(self, trainer) -> None:
        path = last_checkpoint_path(trainer)
        if path is not None:
            trainer.save_checkpoint(path, weights_only=False)  # the full state: resume needs it
            log.warning("stopped at step %d: saved %s; rerun the same command to resume", trainer.global_step, path)
        raise KeyboardInterrupt if self.signal == signal.SIGINT else SIGTERMException

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        self._saved_step = checkpoint["global_step"]

    def on_train_end(self, trainer, pl_module) -> None:
        self._restore_handlers()
        if self.signal is not None:  # it came during the last validation: stop before testing
            self._save_and_stop(trainer)
        path = last_checkpoint_path(trainer)
        if path is not None and self._saved_step != trainer.global_step:
            trainer.save_checkpoint(path, weights_only=False)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._restore_handlers()


class ResumeRng(Callback):
    """The torch generators that draw dropout masks, of every rank, saved with each checkpoint
    of a fit and restored just before the first resumed step, so that nothing Lightning or the
    DataLoader draws while starting up shifts the masks of the resumed run."""

    KEY = "qkvmt_rng"

    def __init__(self):
        self._to_restore: dict | None = None

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if trainer.state.fn == "fit":
            checkpoint[self.KEY] = rng_states(trainer.strategy)

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        self._to_restore = checkpoint.get(self.KEY)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        if self._to_restore is not None:
            set_rng_state(self._to_restore, trainer.global_rank)
            self._to_restore = None


def rng_states(strategy) -> dict:
    """Every rank's torch generators stacked in rank order ((world size, state bytes) tensors:
    plain data for weights_only). Each rank draws its own masks, so each resumes from its own
    state. Called on every rank, as checkpoints are."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()  # this rank's device
    if strategy.world_size == 1:
        return {k: v[None] for k, v in state.items()}
    return {k: strategy.all_gather(v.to(strategy.root_device)).cpu() for k, v in state.items()}


def set_rng_state(state: dict, rank: int) -> None:
    """Restore this rank's generators (with fewer saved ranks than now, rank % saved)."""
    # clone: a row of the stacked states is a view, and torch.set_rng_state reads a view's
    # storage from its start (torch 2.13 segfaults on row 1)
    torch.set_rng_state(state["cpu"][rank % len(state["cpu"])].clone())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"][rank % len(state["cuda"])].clone())


class NonFiniteLoss(UserError):
    """The training loss became NaN or infinite."""


class StopOnNonFiniteLoss(Callback):
    """A NaN or infinite training loss stops training, naming its step, before any validation or
    checkpoint holds an update made after it.

    Reading the loss on the host each step would make it wait for a GPU's queued work, every step.
    So the device keeps the first non-finite loss and its step, and the host reads them where it
    waits anyway or must not go on without knowing: at each step the loggers read
    (trainer.log_every_n_steps), before each validation and each checkpoint, and when training
    ends. Updates after the bad step stay in memory only, and are never saved. Every rank decides
    together (the earliest bad step of any rank), or the others would wait forever in a collective.
    """

    NONE = torch.iinfo(torch.int64).max  # no non-finite loss yet

    def __init__(self):
        self._saved_step: int | None = None  # the step of the newest checkpoint written or resumed from
        self._bad_step: torch.Tensor | None = None  # () int64 on the device: the first non-finite loss's step, or NONE
        self._bad_loss: torch.Tensor | None = None  # () float32 on the device: that loss

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        self._saved_step = checkpoint.get("global_step")

    def on_train_start(self, trainer, pl_module) -> None:
        self._bad_step = torch.full((), self.NONE, dtype=torch.int64, device=pl_module.device)
        self._bad_loss = torch.zeros((), device=pl_module.device)

    def on_before_backward(self, trainer, pl_module, loss) -> None:  # training steps only: after on_train_start
        first = ~torch.isfinite(loss.detach()) & (self._bad_step == self.NONE)  # on the device: nothing waits
        self._bad_step = torch.where(first, trainer.global_step, self._bad_step)
        self._bad_loss = torch.where(first, loss.detach().float(), self._bad_loss)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        # Once an optimizer step, however many batches it accumulated, on every rank alike (the
        # check is collective): at the steps whose values the loggers read back anyway.
        if logged(trainer, trainer.global_step + 1):
            self.check(trainer)

    def on_validation_start(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":
            self.check(trainer)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if trainer.state.fn == "fit":
            self.check(trainer)  # raising here writes nothing
        self._saved_step = checkpoint["global_step"]

    def on_train_end(self, trainer, pl_module) -> None:
        self.check(trainer)

    def check(self, trainer) -> None:
        """Raise NonFiniteLoss on every rank if any rank's loss was not finite (collective)."""
        if self._bad_step is None:  # the sanity-check validation, before training starts
            return
        step = int(trainer.strategy.reduce(self._bad_step.clone(), reduce_op="min"))
        if step == self.NONE:
            return
        last = (
            f"the last good checkpoint is from step {self._saved_step} (checkpoints/last.ckpt); "
            if self._saved_step is not None
            else "no checkpoint was written yet; "
        )
        what = str(self._bad_loss.item()) if int(self._bad_step) == step else "not finite on another rank"
        raise NonFiniteLoss(
            f"training loss is {what} at step {step}: stopped; {last}lower module.optimizer.lr, "
            "raise module.warmup_steps or set trainer.gradient_clip_val, then rerun"
        )


class LostProcess(UserError):
    """Another process of a distributed run died or became unreachable."""


# gloo's transport errors reach Python as plain RuntimeErrors (from the gradient all-reduce,
# through autograd); the other backends' as torch.distributed.DistError.
_BACKEND_ERROR = re.compile(r"gloo/transport|NCCL error|Connection (closed|reset) by peer")


@contextmanager
def stop_on_lost_process(trainer):
    """In a run of several processes, the error torch.distributed raises when another one dies
    (gloo: "Connection closed by peer", in the next collective) or a collective times out becomes
    LostProcess: one line, naming the step and the backend's reason, instead of a traceback. Every
    process of the run meets it in its next collective, so every one stops."""
    try:
        yield
    except RuntimeError as e:
        if trainer.world_size < 2 or not (isinstance(e, torch.distributed.DistError) or _BACKEND_ERROR.search(str(e))):
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        reason = re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # without the source file and advice
        raise LostProcess(
            f"lost another process of this distributed run at step {trainer.global_step} ({reason}): every "
            "process stops; rerun the same command on every node to resume from the last checkpoint"
        ) from None


@contextmanager
def closing_process_group():
    """Destroy the process group the run formed when it ends, however it ends. Lightning leaves it
    open; a process that exits with a gloo group open can abort while Python shuts down (gloo's
    worker threads outlive the interpreter: SIGABRT, "terminate called without an active
    exception"), and torchrun then reports a run that finished as failed."""
    try:
        yield
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def last_checkpoint_path(trainer) -> Path | None:
    """Where the run's ModelCheckpoint keeps last.ckpt (None if the run keeps no checkpoints)."""
    for cb in trainer.checkpoint_callbacks:
        if isinstance(cb, ModelCheckpoint) and cb.dirpath:
            return Path(cb.dirpath) / f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"
    return None
