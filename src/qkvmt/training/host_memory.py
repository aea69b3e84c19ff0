"""Host memory: keep freed blocks for reuse, measure each process's resident set, and warn
before a run that the machine cannot hold.

glibc serves allocations above 32 MB (logits, their gradients) with fresh mmap()s and unmaps
them on free, so each training step page-faults its largest buffers in again. On 2 CPU cores
that cost a quarter of the step time (0.71 -> 0.53 s for model=small, measured). Turning off
mmap for large blocks and raising the trim threshold lets the heap keep and reuse them.

What a CPU training process holds (CHANGELOG.md, the CPU recipe): about 0.5 GB of imported code
(torch, Lightning, datasets), the model, its gradients and Adam's state, one batch's
activations, one chunk of logits, and under bf16 autocast oneDNN's cache of matmul primitives,
one set per matmul shape. That cache is why every shape a step runs must come from a small set:
qkvmt.model.loss pads its rows to a multiple, qkvmt.training.matmul_rows the linear layers'.
"""

import ctypes
import functools
import logging
import os
import sys

import torch
from lightning.pytorch.callbacks import Callback

from qkvmt.model.loss import CHUNK_ROWS
from qkvmt.training.torch_build import CPU_BUILD, CUDA_BUILD_MB, drop_idle_cuda_pages, idle_cuda_build

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
RSS_READABLE = os.path.exists("/proc/self/statm")  # resident_bytes() works (Linux)
MB = 2**20
# What a CPU training process holds besides what grows with its model and batch: the imports
# (0.36 GB with torch's CPU build), oneDNN's primitives, the heap's free blocks, Lightning's and
# DDP's buffers. Set so that the estimate meets the CPU recipe's measured peak over the hour with
# a CUDA build (1.62 GB on an AMX Xeon; 1.46 GB with its idle library pages dropped against an
# estimate of 1.48); with the CPU build it measured 1.31 GB in four minutes against an estimate
# of 1.33.
PROCESS_BASE_MB = 1060
# oneDNN keeps up to 1,024 built bf16 matmul primitives by default. Training pads its linear
# layers' rows so that an epoch of the CPU recipe needs about 290 (qkvmt.training.matmul_rows);
# 512 keeps them all with room for other pairs' lengths, so none is rebuilt (2-8 ms each with
# AMX) and none is added after the first epoch: primitives added all along fragmented the heap.
ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
ONEDNN_CACHE_PRIMITIVES = 512


@functools.cache  # loaded once: releases run every 50 steps
def _glibc():
    """The C library where it is glibc on Linux (mallopt, malloc_trim), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_freed_host_memory(trim_threshold: int = 1 << 30) -> bool:
    """Returns whether the setting took effect (glibc on Linux only; elsewhere a no-op)."""
    libc = _glibc()
    return (
        libc is not None and bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))
    )


def bound_onednn_cache(capacity: int = ONEDNN_CACHE_PRIMITIVES) -> int:
    """Caps oneDNN's primitive cache for this process and the processes it starts, unless the
    user set ONEDNN_PRIMITIVE_CACHE_CAPACITY; returns the capacity in force. oneDNN reads the
    variable when it builds its first primitive, so this must run before any bf16 product."""
    os.environ.setdefault(ONEDNN_CACHE, str(capacity))
    return int(os.environ[ONEDNN_CACHE])


def prepare_host_memory() -> int:
    """The process-wide settings a CPU training process runs with (training, and the benchmark,
    which measures it): freed blocks kept, oneDNN's cache bounded. Returns the cache's capacity."""
    keep_freed_host_memory()
    return bound_onednn_cache()


def release_freed_host_memory() -> bool:
    """Give the pages of every free heap block back to the OS (glibc's malloc_trim(0)); returns
    whether it could (glibc on Linux only)."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


class ReleaseFreedHostMemory(Callback):
    """Kept blocks fragment: in the CPU recipe half of a process's heap was free yet resident
    after a few hundred steps (500 of 1,050 MB). Every `every_n_steps` steps, and around each
    validation and test (their decoding allocates other sizes), the free pages go back. A step
    after a release faults its buffers in again, once per N steps. At the start of training, a
    CUDA build without a GPU also drops its libraries' idle file pages (0.14 GB a process,
    qkvmt.training.torch_build)."""

    def __init__(self, every_n_steps: int = 50):
        self.every_n_steps = every_n_steps

    def on_train_start(self, trainer, *args) -> None:
        dropped = drop_idle_cuda_pages()  # every process: they are each process's page tables
        if dropped and trainer.is_global_zero:
            log.info(
                "dropped %d MB of CUDA library pages this machine cannot use from each process's resident set",
                round(dropped / MB),
            )

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step % self.every_n_steps == 0:
            release_freed_host_memory()

    def on_validation_start(self, *args) -> None:
        release_freed_host_memory()

    on_validation_end = on_test_start = on_test_end = on_validation_start


def resident_bytes() -> int:
    """This process's resident set now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_resident_bytes() -> int:
    """This process's largest resident set so far: on Linux the high-water mark of its own
    address space (VmHWM), elsewhere ru_maxrss (bytes on macOS, KB on other Unixes).

    Not ru_maxrss on Linux: a process started by fork and exec (multiprocessing's spawn,
    subprocess, Lightning's DDP launcher; with vfork, as Python uses) begins with its parent's
    high-water mark in it, so a small process started by a large one reports the large one's
    peak (4 GB for a 0.5 GB training process started by the benchmark, measured)."""
    if RSS_READABLE:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    import resource  # Unix only

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def available_bytes() -> int | None:
    """What the machine can still give without swapping (MemAvailable), or None off Linux."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def training_need_mb(model, max_tokens: int, chunk_rows: int = CHUNK_ROWS) -> float:
    """A rough peak resident set of one CPU training process for a ModelConfig: the base (more
    with a CUDA build of torch); weights, gradients and Adam's two moments (16 bytes a
    parameter); one batch's activations (each layer's inputs, attention and feed-forward
    states, in float32 and bf16); one chunk of logits with its float32 log-softmax and gradient
    (qkvmt.model.loss)."""
    d, f, e, n = model.d_model, model.ffn_dim, model.encoder_layers, model.decoder_layers
    params = model.vocab_size * d + e * (4 * d * d + 2 * d * f) + n * (8 * d * d + 2 * d * f)
    activations = max_tokens * (e + 2 * n) * (24 * d + 6 * f)
    logits = min(max_tokens, chunk_rows) * model.vocab_size * 14
    base = PROCESS_BASE_MB + (CUDA_BUILD_MB if torch.version.cuda is not None else 0)
    return base + (16 * params + activations + logits) / MB


def warn_if_short(need_mb_per_process: float, processes: int) -> str | None:
    """The warning to print first when the machine has less memory available than the run's
    processes need (None when it has enough, or when it cannot tell)."""
    available = available_bytes()
    need = need_mb_per_process * processes
    if available is None or available / MB >= need:
        return None
    ways = ["close other programs", "lower data.max_tokens (half the tokens, about half the activations)"]
    if idle_cuda_build():
        ways.append(f"install torch's CPU build ({CPU_BUILD})")
    if processes > 1:
        ways.append(f"run one process instead of {processes} (trainer.devices=1 trainer.strategy=auto)")
    return (
        f"this machine has {available / 2**30:.1f} GB of memory available; the run needs about "
        f"{need / 1024:.1f} GB ({processes} process(es) of {need_mb_per_process / 1024:.1f} GB) and may be killed: "
        f"{', '.join(ways[:-1])} or {ways[-1]}"
    )


class RecordHostMemory(Callback):
    """Each process's resident set at every validation, its peak and its last, gathered across
    processes for train_metrics.json: growth over a long run shows in them."""

    def __init__(self):
        self.at_step: dict[int, float] = {}  # global step -> this process's RSS (MB)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking and RSS_READABLE:
            self.at_step[trainer.global_step] = resident_bytes() / MB

    def summary(self, trainer) -> dict:
        """Collective: every process must call it. Lists hold one figure per process, rank order;
        empty off Linux."""
        if not RSS_READABLE:
            return {}
        steps = sorted(self.at_step)  # the same validation steps on every rank
        mine = torch.tensor(
            [peak_resident_bytes() / MB, resident_bytes() / MB, *(self.at_step[s] for s in steps)],
            dtype=torch.float64,
            device=trainer.strategy.root_device,
        )
        every = trainer.strategy.all_gather(mine).reshape(trainer.world_size, -1).cpu().round().long().tolist()
        return {
            "peak_rss_mb": [r[0] for r in every],
            "end_rss_mb": [r[1] for r in every],
            "rss_mb_at_step": {str(s): [r[2 + i] for r in every] for i, s in enumerate(steps)},
        }
