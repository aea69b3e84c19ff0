"""Training on several nodes as docs/training.md says to run it: one torchrun per node, each
starting the installed `qkvmt train` with trainer.num_nodes=2. Here two "nodes" of one CPU
process each run on this machine, each with its own run folder and data cache; a test-only
callback records each rank's batches and final weights. Then one node is killed mid-run: the
other stops with one line saying what happened and how to resume.

The installed tool is `$QKVMT_INSTALLED/qkvmt` (and its torchrun) where CI installed the wheel
into a fresh environment, else the `qkvmt` and `torchrun` on PATH."""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from qkvmt.training.faults import LostProcess, stop_on_lost_process
from tests.conftest import free_port, tiny_overrides, write_corpus

RECORDER = '''
"""A test-only callback: each rank's batches (a hash of their source ids) and, at the end of
training, a hash of its weights, in <folder>/rank<global rank>.json."""
import hashlib, json, os
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class RecordBatches(Callback):
    def __init__(self, folder):
        self.folder, self.batches = Path(folder), []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.batches.append(hashlib.sha1(batch["src"].cpu().numpy().tobytes()).hexdigest())
        self.write(trainer)

    def on_train_end(self, trainer, module):
        weights = hashlib.sha1()
        for name, value in sorted(module.state_dict().items()):
            weights.update(name.encode() + value.detach().cpu().numpy().tobytes())
        self.write(trainer, weights=weights.hexdigest())

    def write(self, trainer, **extra):
        record = {"rank": trainer.global_rank, "node": trainer.node_rank, "world": trainer.world_size,
                  "batches": self.batches, **extra}
        path = self.folder / f"rank{trainer.global_rank}.json"
        path.with_suffix(".tmp").write_text(json.dumps(record))
        os.replace(path.with_suffix(".tmp"), path)  # the test reads it while training goes on
'''


def installed(name: str) -> str:
    folder = os.environ.get("QKVMT_INSTALLED")
    path = str(Path(folder) / name) if folder else shutil.which(name)
    assert path and Path(path).exists(), f"no {name}: pip install -e . (or set QKVMT_INSTALLED to a bin folder)"
    return path


class Nodes:
    """Two torchrun launchers, node ranks 0 and 1, on this machine."""

    def __init__(self, base: Path, steps: int, val_every: int):
        self.base, self.procs = base, []
        (base / "record_batches.py").write_text(RECORDER)
        self.corpus = write_corpus(base / "corpus")
        self.steps, self.val_every, self.port = steps, val_every, free_port()

    def folder(self, rank: int) -> Path:
        return self.base / f"node{rank}"

    def start(self, tries: int = 2, timeout: float = 300) -> None:
        """Launch both nodes and wait until each has begun training. Forming the process group
        over TCP can fail on a loaded machine before any step (gloo aborts with "terminate called
        without an active exception" while connecting): that, and only that, is retried on a
        fresh port and folders, saying so. Anything once training has begun fails the test."""
        for attempt in range(1, tries + 1):
            self.launch()
            deadline = time.time() + timeout
            while time.time() < deadline:
                if all(self.record(rank) or proc.poll() == 0 for rank, proc in enumerate(self.procs)):
                    return
                failed = [rank for rank, proc in enumerate(self.procs) if proc.poll() not in (None, 0)]
                if failed:
                    break
                time.sleep(0.2)
            else:
                pytest.fail(f"the nodes did not begin training in {timeout:.0f} s:\n{self.output(0)[-3000:]}")
            rank = failed[0]
            if attempt == tries or self.record(rank):
                pytest.fail(f"node {rank} exited {self.procs[rank].poll()}:\n{self.output(rank)[-3000:]}")
            print(f"the process group did not form (try {attempt}), node {rank}:\n{self.output(rank)[-1500:]}")
            self.stop()
            for folder in (self.folder(0), self.folder(1), *self.base.glob("rank*.json")):
                shutil.rmtree(folder) if folder.is_dir() else folder.unlink()
            self.procs, self.port = [], free_port()

    def launch(self) -> None:
        for rank in (0, 1):
            node = self.folder(rank)
            node.mkdir()
            overrides = [
                o
                for o in tiny_overrides(self.corpus, node, self.steps, self.val_every)  # data.cache_dir: the node's own
                if not o.startswith("paths.output_dir")
            ]
            cmd = [
                installed("torchrun"),
                "--nnodes=2",
                "--nproc_per_node=1",
                f"--node_rank={rank}",
                "--master_addr=127.0.0.1",
                f"--master_port={self.port}",
                "--no-python",
                installed("qkvmt"),
                "train",
                *overrides,
                "trainer.num_nodes=2",
                "trainer.devices=1",
                "trainer.strategy=ddp",
                "trainer.accelerator=cpu",
                f"hydra.run.dir={node / 'run'}",
                f"+callbacks.record={{_target_:record_batches.RecordBatches,folder:'{self.base}'}}",
            ]
            env = os.environ | {
                "PYTHONPATH": os.pathsep.join(filter(None, [str(self.base), os.environ.get("PYTHONPATH")]))
            }
            with open(node / "output.log", "w") as log:
                self.procs.append(
                    subprocess.Popen(
                        cmd, cwd=node, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
                    )
                )

    def output(self, rank: int) -> str:
        return (self.folder(rank) / "output.log").read_text(errors="replace")

    def record(self, rank: int) -> dict | None:
        path = self.base / f"rank{rank}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def kill(self, rank: int) -> None:
        """SIGKILL a node's launcher and its workers, as if the machine died (torchrun starts each
        worker in a session of its own, so the launcher's process group does not hold them)."""
        proc = self.procs[rank]
        for pid in process_tree(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        for rank, proc in enumerate(self.procs):
            if proc.poll() is None or process_tree(proc.pid)[1:]:
                self.kill(rank)


def process_tree(pid: int) -> list[int]:
    """pid and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


@pytest.fixture
def nodes(tmp_path):
    made = []

    def make(steps: int, val_every: int) -> Nodes:
        made.append(Nodes(tmp_path, steps, val_every))
        return made[-1]

    yield make
    for n in made:
        n.stop()


@pytest.mark.slow
def test_two_nodes_train_on_different_batches_into_the_same_weights_and_checkpoint_once(nodes):
    run = nodes(steps=6, val_every=3)
    run.start()
    for rank, proc in enumerate(run.procs):
        try:
            code = proc.wait(timeout=480)
        except subprocess.TimeoutExpired:
            pytest.fail(f"node {rank} still running after 480 s:\n{run.output(rank)[-3000:]}")
        assert code == 0, f"node {rank} exited {code}:\n{run.output(rank)[-3000:]}"
    records = [run.record(0), run.record(1)]
    assert [(r["rank"], r["node"], r["world"]) for r in records] == [(0, 0, 2), (1, 1, 2)]
    first, second = (r["batches"] for r in records)
    assert len(first) == len(second) == 6 and not set(first) & set(second)  # each rank its own batches
    assert records[0]["weights"] == records[1]["weights"]  # the gradients were averaged across nodes
    # One checkpoint set, written by rank 0: the checkpoint folder is node 0's on every node, which
    # is why the nodes of a real run share one filesystem.
    assert (run.folder(0) / "run" / "checkpoints" / "last.ckpt").exists()
    assert (run.folder(0) / "run" / "train_metrics.json").exists()
    assert not list(run.folder(1).rglob("*.ckpt")) and not (run.folder(1) / "run" / "train_metrics.json").exists()


@pytest.mark.slow
def test_killing_one_node_stops_the_other_with_one_line_saying_so(nodes):
    run = nodes(steps=2000, val_every=1000)
    run.start()
    deadline = time.time() + 300
    while time.time() < deadline and all(p.poll() is None for p in run.procs):
        record = run.record(1)
        if record and len(record["batches"]) >= 3:
            break
        time.sleep(0.2)
    assert all(p.poll() is None for p in run.procs), f"a node ended early:\n{run.output(0)[-3000:]}"
    assert len(run.record(1)["batches"]) >= 3, "node 1 trained nothing in 300 s"
    run.kill(1)
    try:
        code = run.procs[0].wait(timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"node 0 still running 120 s after node 1 died:\n{run.output(0)[-3000:]}")
    out = run.output(0)
    assert code != 0
    # torchrun's own failure summary follows, but the worker's traceback is gone
    line = re.search(
        r"^error: lost another process of this distributed run at step \d+ \(.+\): every process stops; "
        r"rerun the same command on every node to resume from the last checkpoint$",
        out,
        re.M,
    )
    assert line, out[-3000:]
    assert "RuntimeError" not in out and "Error executing job" not in out, out[-3000:]


def gloo_error() -> RuntimeError:
    return RuntimeError(
        "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:48343. This is typically caused by a remote worker crashing. Check the logs of the remote "
        "worker before reporting an error."
    )


def test_a_lost_process_is_one_line_naming_the_step_and_the_backends_reason():
    trainer = SimpleNamespace(world_size=2, global_step=12)
    with pytest.raises(LostProcess) as lost, stop_on_lost_process(trainer):
        raise gloo_error()
    assert str(lost.value).startswith(
        "lost another process of this distributed run at step 12 (Connection closed by peer [127.0.0.1]:48343): "
    )
    with pytest.raises(LostProcess), stop_on_lost_process(trainer):
        raise torch.distributed.DistBackendError("NCCL communicator was aborted")


@pytest.mark.parametrize(
    "world_size, error",
    [(1, gloo_error()), (2, RuntimeError("mat1 and mat2 shapes cannot be multiplied")), (2, ValueError("x"))],
)
def test_other_errors_and_single_process_runs_are_left_as_they_are(world_size, error):
    with (
        pytest.raises(type(error)) as raised,
        stop_on_lost_process(SimpleNamespace(world_size=world_size, global_step=0)),
    ):
        raise error
    assert raised.value is error
