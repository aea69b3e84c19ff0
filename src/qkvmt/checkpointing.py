"""Checkpoints that survive kills, full disks and Ctrl-C.

- AtomicCheckpointIO writes each checkpoint to a temporary file in the same folder, fsyncs it
  and renames it over the target, so a kill or a full disk mid-save leaves the previous file
  whole. A save that fails is a one-line error naming the file. It reads checkpoints with
  qkvmt.checkpoint.load_checkpoint.
- SaveOnInterrupt turns Ctrl-C (SIGINT) and SIGTERM (pre-emption) into a stop after the current
  step with checkpoints/last.ckpt saved, so rerunning the same command resumes where it stopped.
"""

import logging
import signal
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from qkvmt.checkpoint import load_checkpoint
from qkvmt.errors import UserError
from qkvmt.files import atomic_write

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


def last_checkpoint_path(trainer) -> Path | None:
    """Where the run's ModelCheckpoint keeps last.ckpt (None if the run keeps no checkpoints)."""
    for cb in trainer.checkpoint_callbacks:
        if isinstance(cb, ModelCheckpoint) and cb.dirpath:
            return Path(cb.dirpath) / f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"
    return None
