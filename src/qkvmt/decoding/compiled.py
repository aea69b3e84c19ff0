"""The compiled decoder step: one step of search, from the decoder layers through the output layer,
log-softmax and top-k to the beams' bookkeeping, as one graph of torch.compile (TorchInductor), over a
KV cache allocated once for the search's length. The cache rows of the beams that move are copied
after it, eagerly: only those rows (stable_order keeps most beams in place), which a graph could not
choose without reading its choice back to the host; a graph moving every row copied the whole cache
each step, half of a step at 64 sentences of model=small.

The graph is traced from the eager code itself (`qkvmt.decoding.search.advance` and the model's
modules), so there is one definition of a step; shapes are dynamic (the batch's rows, the tokens so
far, the source length), so a few graphs serve every batch and step (torch.compile traces the first
call's sizes as they are, then as symbols, and once more where two of them first coincide).
TorchInductor keeps what it compiles on disk (its cache, in TORCHINDUCTOR_CACHE_DIR, by default under
the system's temporary folder): a process that meets a model of a shape compiled before traces it
again but compiles nothing, and a cache it cannot read is compiled again. On CUDA the graph is captured in
CUDA graphs ("reduce-overhead"), which take a step's kernel launches off the CPU.
"""

import os
import shutil

import torch
from torch import Tensor

from qkvmt.decoding.finished import Finished
from qkvmt.decoding.search import DecodeConfig, advance
from qkvmt.decoding.stepper import Stepper


def beam_step(
    step: Stepper,
    prefix: Tensor,
    scores: Tensor,
    limit: Tensor,
    active: Tensor,
    finished: Finished,
    cfg: DecodeConfig,
) -> tuple[Tensor, Tensor, Tensor]:
    """A step of beam search over K live beams a sentence, every row kept (no sentence leaves):
    `advance`, then the beams that go on take their prefixes. Returns the prefixes (B*K, t+2) and
    scores (B, K) of the next step and the row each row continues (B*K,), whose cache rows the caller
    moves (Stepper.reorder_beams); `active` and `finished` are updated in place. It reads nothing back
    to the host."""
    k = cfg.beam_size
    keep_scores, keep, beam, token = advance(step, prefix, scores, k, limit, active, finished, cfg)
    rows = torch.arange(keep.size(0), device=keep.device)
    src_rows = (rows[:, None] * k + beam.gather(1, keep)).view(-1)  # (B*K,)
    prefix = torch.cat([prefix.index_select(0, src_rows), token.gather(1, keep).view(-1, 1)], dim=1)
    return prefix, keep_scores.masked_fill(~active[:, None], float("-inf")), src_rows


def unavailable(device: torch.device) -> str | None:
    """Why torch.compile cannot build a step on `device` here, or None where it can."""
    if not torch._dynamo.is_dynamo_supported():
        return f"torch {torch.__version__} cannot compile on this Python or platform"
    if device.type == "cpu":
        given = os.environ.get("CXX")
        if given and not shutil.which(given):
            return f"CXX={given}: no such C++ compiler (TorchInductor compiles the step with it)"
        if not given and not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")):
            return "no C++ compiler (g++ or clang++) was found, which TorchInductor needs on a CPU"
        return None
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "Triton, which TorchInductor needs on CUDA, is not installed"
    return f"the compiled step is built for CPUs and CUDA GPUs, not {device.type}"


def options(device: torch.device) -> dict:
    """torch.compile's settings for a step on `device`: CUDA graphs on CUDA, dynamic shapes everywhere."""
    return {"dynamic": True, "mode": "reduce-overhead" if device.type == "cuda" else None}


_compiled: dict[tuple[str, str], object] = {}  # (function, options) -> its compiled form, made once a process


def compiled(fn, device: torch.device):
    """`fn` (beam_step or greedy_step) compiled for `device`: made on first use; torch.compile
    traces it on its first call and whenever a guard of the graphs it has fails."""
    settings = options(device)
    key = (fn.__name__, repr(settings))
    if key not in _compiled:
        _compiled[key] = torch.compile(fn, **settings)
    return _compiled[key]
