"""Kill, interrupt, full disk, NaN and determinism: training loses nothing and resumes exactly.

The kill tests run scripts/train.py in a real subprocess and stop it with real signals.
"""

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from qkvmt.errors import UserError
from qkvmt.training.faults import AtomicCheckpointIO, CheckpointWriteError
from tests.conftest import ROOT, compose_train, tiny_overrides, training_fixture, write_corpus

STEPS, VAL_EVERY = 40, 7  # the toy corpus makes 5 batches an epoch: checkpoints fall mid-epoch


def train_cmd(corpus: Path, out: Path, *extra: str) -> list[str]:
    overrides = [
        o for o in tiny_overrides(corpus, out, steps=STEPS, val_every=VAL_EVERY) if not o.startswith("paths.output_dir")
    ]
    return [
        sys.executable,
        "scripts/train.py",
        *overrides,
        f"hydra.run.dir={out}",
        "trainer.deterministic=true",
        *extra,
    ]


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def start_and_stop_after_first_checkpoint(cmd: list[str], out: Path, sig: int) -> subprocess.Popen:
    last = out / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not last.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before its first checkpoint: nothing was interrupted"
    proc.send_signal(sig)
    proc.wait(timeout=120)
    return proc


def weights(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


@training_fixture(scope="module")
def uninterrupted(tmp_path_factory):
    base = tmp_path_factory.mktemp("uninterrupted")
    corpus = write_corpus(base / "corpus")
    out = base / "run"
    proc = run(train_cmd(corpus, out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return corpus, out


def test_kill_9_then_rerun_reaches_the_final_step_with_the_same_weights(uninterrupted, tmp_path):
    """SIGKILL after the first checkpoint, rerun the same command: it resumes from last.ckpt,
    keeps the saved tokenizer, ends at the configured step, and (deterministic CPU mode, with
    the data position and RNG restored) its weights equal those of the uninterrupted run."""
    corpus, reference = uninterrupted
    out = tmp_path / "run"
    cmd = train_cmd(corpus, out)
    killed = start_and_stop_after_first_checkpoint(cmd, out, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    stopped_at = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert 0 < stopped_at < STEPS
    tokenizer = (out / "tokenizer.json").read_bytes()

    rerun = run(cmd)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming from" in rerun.stdout + rerun.stderr
    assert (out / "tokenizer.json").read_bytes() == tokenizer  # reused, never retrained
    final = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert final["global_step"] == STEPS
    assert_same_weights(final["state_dict"], weights(reference / "checkpoints" / "last.ckpt"))


def assert_same_weights(found: dict, expected: dict) -> None:
    for name, tensor in found.items():
        torch.testing.assert_close(tensor, expected[name], atol=1e-6, rtol=0, msg=name)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_save_a_checkpoint_exit_cleanly_and_resume(uninterrupted, tmp_path, sig):
    """The run finishes its current step, saves last.ckpt, exits non-zero without a traceback
    (SIGTERM as a one-line error), and the same command then finishes the run."""
    corpus, reference = uninterrupted
    out = tmp_path / "run"
    cmd = train_cmd(corpus, out)
    proc = start_and_stop_after_first_checkpoint(cmd, out, sig)
    stderr, output = proc.stderr.read(), proc.stdout.read()
    assert proc.returncode != 0 and "Traceback" not in stderr
    assert "saved" in output + stderr and "rerun the same command to resume" in output + stderr
    if sig == signal.SIGTERM:
        assert stderr.strip().splitlines()[-1].startswith("error: stopped by SIGTERM at step")
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert saved >= VAL_EVERY  # at least as far as the first checkpoint

    rerun = run(cmd)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    final = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert final["global_step"] == STEPS
    # saved at the end of a step, so the resumed run repeats and skips nothing
    assert_same_weights(final["state_dict"], weights(reference / "checkpoints" / "last.ckpt"))


def test_a_kill_during_a_save_leaves_the_previous_checkpoint_loadable(tmp_path):
    """A process killed between writing and renaming (here: stalled in fsync) never touches
    last.ckpt: the old file still loads, with its old contents."""
    last = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"step": 1, "w": torch.ones(3)}, last)
    script = textwrap.dedent(f"""
        import os, time, torch
        from qkvmt.training.faults import AtomicCheckpointIO
        os.fsync = lambda fd: time.sleep(600)  # the kill arrives while the new file is not yet renamed
        AtomicCheckpointIO().save_checkpoint({{"step": 2, "w": torch.zeros(1_000_000)}}, {str(last)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.time() + 120
    while not list(tmp_path.glob(".last.ckpt.tmp*")) and time.time() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.glob(".last.ckpt.tmp*")), "the save never started"
    proc.kill()
    proc.wait()
    ckpt = torch.load(last, weights_only=True)
    assert ckpt["step"] == 1 and torch.equal(ckpt["w"], torch.ones(3))


@pytest.mark.slow
def test_a_checkpoint_that_cannot_be_written_fails_clearly_and_keeps_earlier_ones(tmp_path, monkeypatch):
    """Disk full at the second checkpoint: a one-line error naming the file; the first is intact."""
    from qkvmt import files
    from qkvmt.pipeline.train import train

    corpus = write_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        # tokenizer.settings.json, run.json, the id cache's by-text/ shortcut, the first validation's best, last, step
        if len(calls) > 6:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)
    with pytest.raises(CheckpointWriteError, match=r"cannot write checkpoint .*\.ckpt \(No space left on device\)"):
        train(compose_train(*tiny_overrides(corpus, out, steps=30, val_every=10)))
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 10
    assert not list((out / "checkpoints").glob(".*tmp*"))  # no half-written file left behind


@pytest.mark.slow
@pytest.mark.parametrize(
    "steps, bad, log_every, good",
    [
        (30, 13, 1, 10),  # read at the next step
        (30, 13, 1000, 10),  # read first before the next validation
        (28, 23, 1000, 20),  # after the last validation: read before the final last.ckpt
    ],
)
def test_a_nan_loss_stops_training_names_the_step_and_saves_nothing_after(
    tmp_path, monkeypatch, steps, bad, log_every, good
):
    from qkvmt.pipeline.train import train
    from qkvmt.training.module import TranslationModule

    corpus = write_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    real_loss = TranslationModule.loss

    def loss(self, batch):
        value = real_loss(self, batch)
        return value * float("nan") if self.training and self.global_step == bad else value

    monkeypatch.setattr(TranslationModule, "loss", loss)
    with pytest.raises(UserError, match=rf"training loss is nan at step {bad}: .*from step {good}"):
        train(
            compose_train(
                *tiny_overrides(corpus, out, steps=steps, val_every=10), f"trainer.log_every_n_steps={log_every}"
            )
        )
    last = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == good and all(torch.isfinite(t).all() for t in last["state_dict"].values())
    assert {p.name for p in (out / "checkpoints").iterdir()} == {"best.ckpt", "last.ckpt"} | {
        f"step{s:07d}.ckpt" for s in range(10, good + 1, 10)
    }  # nothing after the last good one


@pytest.mark.slow
def test_gradient_clipping_trains_under_mixed_precision(tmp_path):
    """Lightning refuses to clip a fused optimizer's gradients under mixed precision; with
    clipping asked for, the recipe's Adam runs unfused and training goes on."""
    from qkvmt.pipeline.train import train

    corpus = write_corpus(tmp_path / "corpus")
    overrides = tiny_overrides(corpus, tmp_path / "run", steps=4, val_every=4)
    metrics = train(compose_train(*overrides, "trainer.gradient_clip_val=0.5", "trainer.precision=bf16-mixed"))
    assert metrics["steps"] == 4 and metrics["precision"] == "bf16-mixed"


@pytest.mark.slow
def test_same_seed_in_deterministic_mode_gives_identical_losses(tmp_path):
    """Two CPU runs with seed=S and trainer.deterministic=true log the same 50 training losses."""
    from qkvmt.pipeline.train import train

    corpus = write_corpus(tmp_path / "corpus")
    losses = []
    for name in ("a", "b"):
        out = tmp_path / name
        train(
            compose_train(*tiny_overrides(corpus, out, steps=50, val_every=50), "seed=7", "trainer.deterministic=true")
        )
        log = pd.read_csv(out / "csv" / "metrics.csv")
        losses.append(log["train/loss"].dropna().tolist())
    assert len(losses[0]) == 50
    assert losses[0] == losses[1]


@pytest.mark.parametrize("content", [None, b"not a checkpoint"], ids=["missing", "corrupt"])
def test_a_bad_resume_path_is_a_one_line_error_before_training(tmp_path, content):
    from qkvmt.pipeline.train import train

    corpus = write_corpus(tmp_path / "corpus")
    bad = tmp_path / "given.ckpt"
    if content is not None:
        bad.write_bytes(content)
    with pytest.raises(UserError, match=str(bad)):
        train(compose_train(*tiny_overrides(corpus, tmp_path / "run", steps=4), f"resume={bad}"))
    assert not (tmp_path / "run" / "checkpoints").exists()
