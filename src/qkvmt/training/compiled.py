"""How a training step is compiled: torch.compile's mode, and what a mode needs to take effect.

The step compiles with dynamic shapes, so one graph serves batches of every shape. A mode with
CUDA graphs (reduce-overhead, max-autotune) then records one CUDA graph per batch shape and
replays it: a step's kernels are launched at once, and a GPU that runs many small kernels no
longer waits for the host to launch them. Batches take few shapes when their lengths come in
multiples (data.length_multiple=8, as compiled runs have): on Multi30k fewer than torch records
before it warns (tests/training/test_compiled.py). On a device other than CUDA, torch skips the
graphs: such a mode is refused there, not ignored.
"""

from collections.abc import Callable

import torch
from torch._inductor import list_mode_options

from qkvmt.errors import UserError

MODES = tuple(list_mode_options())  # torch's own list: default, reduce-overhead, max-autotune, ...


def uses_cuda_graphs(mode: str) -> bool:
    return bool(list_mode_options(mode).get("triton.cudagraphs"))


def check_compile(compile: bool, mode: str, device: str, where: str) -> None:
    """Refuse a compile mode that would not take effect on this run's device ('cuda', 'cpu',
    ...). where: the settings' prefix on the command line ('module.' in qkvmt train, '' in
    qkvmt benchmark)."""
    if mode not in MODES:
        raise UserError(f"{where}compile_mode={mode!r}: use one of {', '.join(MODES)} (torch.compile's modes)")
    if mode != "default" and not compile:
        raise UserError(f"{where}compile_mode={mode}: nothing is compiled; add {where}compile=true")
    if uses_cuda_graphs(mode) and device != "cuda":
        raise UserError(
            f"{where}compile_mode={mode} replays CUDA graphs, and this run has no CUDA device ({device}): "
            f"run it on a GPU, or use {where}compile_mode=default"
        )


def compiled(fn: Callable, mode: str = "default", backend: str | Callable = "inductor") -> Callable:
    """torch.compile of a step function, dynamic from the start: token-budget batches differ in
    rows and both lengths, and dynamo's default compiles a static graph first, then again once
    shapes change (and again for a dimension that stayed put until then). On an H200 the default
    timed no benchmark step in 140 s."""
    return torch.compile(fn, dynamic=True, backend=backend, mode=None if mode == "default" else mode)
