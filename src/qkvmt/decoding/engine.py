"""Which engine runs a search: the compiled step (qkvmt.decoding.compiled) or the eager one, and why.

decode.compile=true asks for the compiled step: where it cannot be built at all, the command fails
in one line before any work. decode.compile=auto uses it only where the steps it saves repay its
compile, on a CPU: measured on 2 Zen 5 cores at model=small's size, a compiled step is within a few
percent of the eager one (0.97x at 512 sentences a batch, up to 1.09x at 4: the products and the
attention kernel, the same in both, are most of a step), and a compile costs over a minute the first
time and some 30 s in each later process (TorchInductor's disk cache spares the code generation, not
the tracing); so only a call of AUTO_SENTENCES sentences or more.
On CUDA, where the compiled step runs in CUDA graphs, it has not been measured: there auto decodes
eagerly, and decode.compile=true compiles. A model that a hook or edit reads or writes runs eagerly
under either setting, as does one whose rows an edit keeps in place: the graph would not run them.
Each search's result says which engine ran and why (Translations.engine); a fallback of `auto` for
want of a compiler is logged once a process.
"""

import functools
import logging
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkvmt.decoding.compiled import beam_step, compiled, unavailable
from qkvmt.decoding.compute_type import computing
from qkvmt.decoding.finished import Hypothesis
from qkvmt.decoding.greedy import greedy_search, greedy_step
from qkvmt.decoding.rows import are_rows_kept
from qkvmt.decoding.search import DecodeConfig, beam_search
from qkvmt.decoding.step_view import searching
from qkvmt.errors import UserError
from qkvmt.model.sites import any_global_hook
from qkvmt.model.weight_casts import cast_once

log = logging.getLogger(__name__)

# A call of this many sentences or more compiles under decode.compile=auto (on a CPU); fewer decode eagerly.
AUTO_SENTENCES = 20_000


@dataclass(frozen=True)
class Engine:
    compiled: bool
    why: str

    def __str__(self) -> str:
        return f"{'compiled' if self.compiled else 'eager'} ({self.why})"


def hooked_modules(model: nn.Module) -> bool:
    """Whether any forward hook, of the model's modules or global, would fire in a pass."""
    return any_global_hook() or any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def engine_for(model, device: torch.device, cfg: DecodeConfig, sentences: int) -> Engine:
    """The engine of a search of `sentences` on `device` with settings `cfg`."""
    compile_setting, use_cache, beam_size = cfg.compile, cfg.use_cache, cfg.beam_size
    if compile_setting == "false":
        return Engine(False, "decode.compile=false")
    asked = compile_setting == "true"
    if not use_cache:
        return Engine(False, "decode.use_cache=false: the compiled step runs over the KV cache")
    if not isinstance(model, nn.Module):
        return Engine(False, "the model is no torch module")
    if cfg.compute_type == "int8":
        return Engine(False, "decode.compute_type=int8 runs on the eager step")
    reason = unavailable(device)
    if reason is not None:
        if asked:
            raise UserError(f"decode.compile=true: {reason}; use decode.compile=auto or false")
        return _fallback(f"no compiled step: {reason}")
    if hooked_modules(model) or are_rows_kept():
        return Engine(False, "a hook or edit is set on the model, and only the eager step runs them")
    if not asked and device.type != "cpu":
        return Engine(False, f"decode.compile=auto compiles on CPUs only; on {device.type}, decode.compile=true")
    if not asked and sentences < AUTO_SENTENCES:
        return Engine(False, f"decode.compile=auto: {sentences} sentence(s), fewer than {AUTO_SENTENCES}")
    return Engine(True, f"decode.compile={compile_setting}, {'beam' if beam_size > 1 else 'greedy'} search")


def _fallback(why: str) -> Engine:
    _say_once(why)
    return Engine(False, why)


@functools.cache
def _say_once(why: str) -> None:
    log.warning("decode.compile=auto decodes eagerly: %s", why)


def generate(
    model, src: Tensor, cfg: DecodeConfig, lines: Tensor | None = None, engine: Engine | None = None
) -> list[Hypothesis]:
    """One hypothesis per source row: greedy for beam_size 1, beam search otherwise, on `engine` (by
    default the one engine_for chooses for these rows), computed in cfg.compute_type
    (qkvmt.decoding.compute_type: float32 keeps a caller's autocast, bfloat16 sets one over it, int8 sets it
    aside); under autocast its steps share one cast of each parameter (qkvmt.model.weight_casts).
    lines: (B,) the index of each row among the lines of the call (qkvmt.decoding.step_view), 0..B-1
    by default."""
    lines = torch.arange(src.size(0), device=src.device) if lines is None else lines
    if engine is None:
        engine = engine_for(model, src.device, cfg, src.size(0))
    greedy = cfg.beam_size == 1
    step = compiled(greedy_step if greedy else beam_step, src.device) if engine.compiled else None
    with computing(cfg.compute_type, src.device), cast_once(), searching(lines):
        return greedy_search(model, src, cfg, step) if greedy else beam_search(model, src, cfg, step)
