"""Host memory in training: give freed blocks back every so many steps, record each process's
resident set, and warn before a run that the machine cannot hold. How freed memory is kept, and
the readings of a resident set, are qkvmt.host.process_memory.

What a CPU training process holds (CHANGELOG.md, the CPU recipe): about 0.5 GB of imported code
(torch, Lightning, datasets), the model, its gradients and Adam's state, one batch's
activations, one chunk of logits, and under bf16 autocast oneDNN's cache of matmul primitives,
one set per matmul shape. That cache is why every shape a step runs must come from a small set:
qkvmt.model.loss pads its rows to a multiple, qkvmt.training.matmul_rows the linear layers'.
"""

import logging

import torch
from lightning.pytorch.callbacks import Callback

from qkvmt.host.process_memory import (
    MB,
    RSS_READABLE,
    available_bytes,
    peak_resident_bytes,
    release_freed_host_memory,
    resident_bytes,
)
from qkvmt.model.loss import CHUNK_ROWS
from qkvmt.training.torch_build import CPU_BUILD, CUDA_BUILD_MB, drop_idle_cuda_pages, idle_cuda_build

log = logging.getLogger(__name__)

# What a CPU training process holds besides what grows with its model and batch: the imports
# (0.36 GB with torch's CPU build), oneDNN's primitives, the heap's free blocks, Lightning's and
# DDP's buffers. Set so that the estimate meets the CPU recipe's measured peak over the hour with
# a CUDA build (1.62 GB on an AMX Xeon; 1.46 GB with its idle library pages dropped against an
# estimate of 1.48); with the CPU build it measured 1.31 GB in four minutes against an estimate
# of 1.33.
PROCESS_BASE_MB = 1060


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
