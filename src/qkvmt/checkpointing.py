"""Checkpoints that survive kills, full disks and Ctrl-C.

- AtomicCheckpointIO writes each checkpoint to a temporary file in the same folder, fsyncs it
  and renames it over the target, so a kill or a full disk mid-save leaves the previous file
  whole. A save that fails is a one-line error naming the file.
- SaveOnInterrupt saves checkpoints/last.ckpt when training is stopped by Ctrl-C (SIGINT) or
  SIGTERM (pre-emption), so rerunning the same command resumes where it stopped.
"""

import logging
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from qkvmt.errors import UserError
from qkvmt.files import atomic_write

log = logging.getLogger(__name__)


class CheckpointWriteError(UserError):
    """A checkpoint could not be written (disk full, read-only folder)."""


class AtomicCheckpointIO(TorchCheckpointIO):
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
    """On SIGINT or SIGTERM during fit, save last.ckpt before Lightning shuts down."""

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if not isinstance(exception, (KeyboardInterrupt, SIGTERMException)) or trainer.state.fn != "fit":
            return
        path = last_checkpoint_path(trainer)
        if path is None:
            return
        trainer.save_checkpoint(path, weights_only=False)  # the full state: resume needs it
        log.warning("interrupted at step %d: saved %s; rerun the same command to resume", trainer.global_step, path)


def last_checkpoint_path(trainer) -> Path | None:
    """Where the run's ModelCheckpoint keeps last.ckpt (None if the run keeps no checkpoints)."""
    for cb in trainer.checkpoint_callbacks:
        if isinstance(cb, ModelCheckpoint) and cb.dirpath:
            return Path(cb.dirpath) / f"{ModelCheckpoint.CHECKPOINT_NAME_LAST}{ModelCheckpoint.FILE_EXTENSION}"
    return None
