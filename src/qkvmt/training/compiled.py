"""How a training step is compiled: torch.compile's mode, and what a mode needs to take effect.

The step compiles with dynamic shapes, so one graph serves batches of every shape. A mode with
CUDA graphs (reduce-overhead, max-autotune) then records one CUDA graph per batch shape and
replays it: a step's kernels are launched at once, and a GPU that runs many small kernels no
longer waits for the host to launch them. Batches take few shapes when their lengths come in
multiples (data.length_multiple=8, as compiled runs have): on Multi30k at most as many as torch
records before it warns (tests/training/test_compiled.py).

Such a mode is refused where its graphs could not run: on a device other than CUDA (torch would
skip them without a word) and with gradients accumulated over several batches (a graph's outputs,
the gradients among them, are overwritten by its next replay). Where torch cannot capture a
graph, compiling fails, naming why, instead of running the step without graphs.
"""

from collections.abc import Callable

import torch
from torch._inductor import config as inductor_config
from torch._inductor import list_mode_options

from qkvmt.errors import UserError

MODES = tuple(list_mode_options())  # torch's own list: default, reduce-overhead, max-autotune, ...
# torch 2.9 and later can fail where a graph cannot be captured; older torch skips it silently
GRAPHS_OR_ERROR = hasattr(inductor_config.triton, "cudagraph_or_error")


def uses_cuda_graphs(mode: str) -> bool:
    return bool(list_mode_options(mode).get("triton.cudagraphs"))


def check_compile(compile: bool, mode: str, device: str, where: str, accumulate: int = 1) -> None:
    """Refuse a compile mode that would not take effect on this run's device ('cuda', 'cpu',
    ...). where: the settings' prefix on the command line ('module.' in qkvmt train, '' in
    qkvmt benchmark); accumulate: batches whose gradients add up before an optimizer step."""
    if mode not in MODES:
        raise UserError(f"{where}compile_mode={mode!r}: use one of {', '.join(MODES)} (torch.compile's modes)")
    if mode != "default" and not compile:
        raise UserError(f"{where}compile_mode={mode}: nothing is compiled; add {where}compile=true")
    if not uses_cuda_graphs(mode):
        return
    if device != "cuda":
        raise UserError(
            f"{where}compile_mode={mode} replays CUDA graphs, and this run has no CUDA device ({device}): "
            f"run it on a GPU, or use {where}compile_mode=default"
        )
    if not GRAPHS_OR_ERROR:
        raise UserError(
            f"{where}compile_mode={mode} needs torch 2.9 or later (this is {torch.__version__}), which stops where "
            "a CUDA graph cannot be captured instead of running without it: upgrade torch, or use "
            f"{where}compile_mode=default"
        )
    if accumulate > 1:
        raise UserError(
            f"{where}compile_mode={mode} with trainer.accumulate_grad_batches={accumulate}: a CUDA graph's next "
            "replay overwrites the gradients being added up; give a larger data.max_tokens instead, or use "
            f"{where}compile_mode=default"
        )


def compiled(fn: Callable, mode: str = "default", backend: str | Callable = "inductor") -> Callable:
    """torch.compile of a step function, dynamic from the start: token-budget batches differ in
    rows and both lengths, and dynamo's default compiles a static graph first, then again once
    shapes change (and again for a dimension that stayed put until then). On an H200 the default
    timed no benchmark step in 140 s."""
    if uses_cuda_graphs(mode):  # torch.compile takes mode= or options=, not both: the mode's options and one more
        options = {**list_mode_options(mode), "triton.cudagraph_or_error": True}
        return torch.compile(fn, dynamic=True, backend=backend, options=options)
    return torch.compile(fn, dynamic=True, backend=backend, mode=None if mode == "default" else mode)
