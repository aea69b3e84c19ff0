"""Two CPU processes (gloo) as users start them: a run through `qkvmt train`, and DDP faults through
scripts/train.py: a SIGTERM to one rank, and a NaN loss on one rank. Both ranks stop together,
last.ckpt is whole, and the same command resumes exactly."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, training_fixture, write_corpus
from tests.training.test_faults import STEPS, VAL_EVERY, assert_same_weights, run, train_cmd, weights

DDP = ["trainer.devices=2", "trainer.strategy=ddp", "trainer.accelerator=cpu"]


def rank_process(parent: int, rank: int, timeout: float = 120) -> int:
    """The pid of the worker Lightning started for `rank` (its command line names the rank)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent and f"train_ddp_process_{rank}" in cmdline:
                return int(pid)
        time.sleep(0.05)
    raise AssertionError(f"no DDP worker for rank {rank} under pid {parent}")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@training_fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference run, through `qkvmt train` where the faulted runs go through its alias
    scripts/train.py: the same weights from both say the two are one command."""
    base = tmp_path_factory.mktemp("ddp")
    corpus = write_corpus(base / "corpus")
    out = base / "run"
    proc = run([sys.executable, "-m", "qkvmt", "train", *train_cmd(corpus, out, *DDP)[2:]])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return corpus, out, proc.stderr


def test_two_ranks_train_through_the_command_and_each_reports_its_own_memory(uninterrupted):
    """Lightning starts the second rank with this process's command line, the subcommand included."""
    _, out, stderr = uninterrupted
    assert "distributed_backend=gloo" in stderr or "world_size: 2" in stderr
    assert (out / "checkpoints" / "last.ckpt").exists()
    memory = json.loads((out / "train_metrics.json").read_text())["host_memory"]  # each process's own
    assert len(memory["peak_rss_mb"]) == len(memory["end_rss_mb"]) == 2
    assert list(memory["rss_mb_at_step"]) == [str(s) for s in range(VAL_EVERY, STEPS + 1, VAL_EVERY)]
    assert all(len(ranks) == 2 for ranks in memory["rss_mb_at_step"].values())
    assert all(peak >= end - 4 > 100 for peak, end in zip(memory["peak_rss_mb"], memory["end_rss_mb"]))


def test_sigterm_to_one_rank_stops_both_at_one_step_and_resumes_exactly(uninterrupted, tmp_path):
    corpus, reference, _ = uninterrupted
    out = tmp_path / "run"
    cmd = train_cmd(corpus, out, *DDP)
    last = out / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = rank_process(proc.pid, 1)
    deadline = time.time() + 300
    while not last.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before its first checkpoint: nothing was interrupted"
    os.kill(worker, signal.SIGTERM)  # rank 1 only: rank 0 learns of it through the all-reduced stop
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode != 0 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("error: stopped by SIGTERM at step")
    assert not alive(worker)
    saved = torch.load(last, weights_only=True)["global_step"]
    assert VAL_EVERY <= saved < STEPS

    rerun = run(cmd)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    final = torch.load(last, weights_only=True)
    assert final["global_step"] == STEPS
    assert_same_weights(final["state_dict"], weights(reference / "checkpoints" / "last.ckpt"))


NAN_ON_RANK_1 = """
import importlib.util
from qkvmt.training.module import TranslationModule

real = TranslationModule.loss

def loss(self, batch):
    value = real(self, batch)
    return value * float("nan") if self.training and self.global_rank == 1 and self.global_step == 13 else value

TranslationModule.loss = loss
# Executed as __main__ (so Hydra finds conf/ beside it and its main block runs), but not with
# runpy, which would put scripts/train.py in sys.argv[0]: Lightning starts rank 1 from
# sys.argv, which must name this wrapper.
spec = importlib.util.spec_from_file_location("__main__", {script!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
"""


@pytest.mark.slow
def test_a_nan_on_one_rank_stops_both_and_keeps_the_last_good_checkpoint(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    # Lightning starts rank 1 by rerunning this command line, so the wrapper patches both ranks.
    wrapper = tmp_path / "nan_on_rank_1.py"
    wrapper.write_text(textwrap.dedent(NAN_ON_RANK_1.format(script=str(ROOT / "scripts" / "train.py"))))
    cmd = [sys.executable, str(wrapper), *train_cmd(corpus, out, *DDP)[2:]]
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    # Each rank prints its own line; the two processes share one stderr pipe, so under load a
    # line may land inside the other rank's output: look for each message, not for line starts.
    errors = re.findall(r"error: training loss is (nan|not finite on another rank) at step 13", proc.stderr)
    assert sorted(errors) == ["nan", "not finite on another rank"], proc.stderr[-3000:]
    last = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == VAL_EVERY  # the checkpoint before the NaN, nothing after
    assert all(torch.isfinite(t).all() for t in last["state_dict"].values())
