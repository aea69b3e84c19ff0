"""Float32 linear layers on a CPU: torch's own product or oneDNN's, whichever is faster on the
machine that runs them, for the passes that need no gradient (decoding, evaluation, analysis).

torch's CPU wheels compute float32 products with Intel MKL, which keeps its AVX-512 kernels for
Intel CPUs: on an AMD EPYC (Zen 5) it runs its AVX2 path, at half the speed of oneDNN, the other
library torch bundles (and the one its bfloat16 products already use). Which of the two is faster
depends on the CPU and on the torch build, so it is measured once a process, on a product of a
decoding step's size, never assumed. QKVMT_FLOAT32_LINEAR pins it: `torch`, `onednn`, or `auto`
(the default: measure). The two differ only in float32 rounding (about 1e-6 of a value).

A pass that records gradients keeps torch's product (oneDNN's has no backward here), and so does
one under autocast, which chooses its own kernels: training computes exactly as before.
"""

import functools
import os
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qkvmt.errors import UserError
from qkvmt.model.weight_casts import autocast_operand
from qkvmt.model.weight_int8 import int8_linear

SETTING = "QKVMT_FLOAT32_LINEAR"
KERNELS = ("auto", "torch", "onednn")
CLEAR_WIN = 0.8  # oneDNN is chosen only where it takes at most this share of torch's time
PROBE = (1024, 256, 1024)  # rows, inputs, outputs: one layer of a decoding step at 200 sentences x 5 beams
# Products of fewer multiply-adds keep torch's kernel: oneDNN's call, with weights it has not packed, costs
# some 20 microseconds before any arithmetic, torch's 4 (2 Zen 5 cores: even at 5 rows x 256 x 768).
SMALL_PRODUCT = 500_000


@dataclass(frozen=True)
class Kernel:
    name: str  # "torch" or "onednn": what float32 products without gradients run on, on a CPU
    why: str  # how it was chosen, for a run's record

    def __str__(self) -> str:
        return f"{self.name} ({self.why})"


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x (..., in) times weight (out, in)ᵀ plus bias, computed by oneDNN (the product torch's
    compiler uses for frozen CPU models)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def _fastest(fns: dict, repeats: int = 5) -> dict[str, float]:
    """Each function's fastest time of `repeats`, the functions taking turns after a warm-up."""
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def _probe() -> tuple[Tensor, Tensor, Tensor]:
    rows, d_in, d_out = PROBE
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*shape, generator=gen) for shape in ((rows, d_in), (d_out, d_in), (d_out,)))


def unavailable() -> str | None:
    """Why oneDNN's product cannot serve here (not in this torch build, or not agreeing with
    torch's on a probe), or None where it can."""
    x, w, b = _probe()
    try:
        with torch.inference_mode():
            same = torch.allclose(onednn_linear(x, w, b), F.linear(x, w, b), rtol=1e-4, atol=1e-4)
    except (RuntimeError, AttributeError) as e:  # torch's errors for a build without the kernel or the operator
        return f"oneDNN's product is not available in this torch build ({str(e).splitlines()[0][:80]})"
    return None if same else "oneDNN's product disagreed with torch's on a probe"


def measure() -> Kernel:
    """oneDNN where it serves here and computes a probe product clearly faster than torch."""
    reason = unavailable()
    if reason is not None:
        return Kernel("torch", reason)
    x, w, b = _probe()
    with torch.inference_mode():
        t = _fastest({"torch": lambda: F.linear(x, w, b), "onednn": lambda: onednn_linear(x, w, b)})
    speed = "oneDNN {:.2f}x torch's on a {}x{}x{} product".format(t["torch"] / t["onednn"], *PROBE)
    return Kernel("onednn" if t["onednn"] <= CLEAR_WIN * t["torch"] else "torch", f"measured: {speed}")


@functools.cache
def float32_kernel() -> Kernel:
    """This process's choice, made on first use (QKVMT_FLOAT32_LINEAR, or measured)."""
    wanted = os.environ.get(SETTING, "auto")
    if wanted not in KERNELS:
        raise UserError(f"{SETTING}={wanted!r}: use one of {', '.join(KERNELS)}")
    if wanted == "auto":
        return measure()
    reason = unavailable() if wanted == "onednn" else None
    if reason is not None:
        raise UserError(f"{SETTING}=onednn: {reason}; use {SETTING}=torch or auto")
    return Kernel(wanted, f"{SETTING}={wanted}")


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear(x, weight, bias), by oneDNN where `float32_kernel` chose it and the call allows it:
    float32 on a CPU, no gradient to record, no autocast (`float32_product`). Under autocast, in a
    search, the parameters come cast once (qkvmt.model.weight_casts); in a search with int8 weights,
    they come rounded to int8 (qkvmt.model.weight_int8). In a graph torch.compile traces without
    gradients (qkvmt.decoding.compiled), float32 products on a CPU are `float32_product` still, as one
    opaque operator: TorchInductor cannot lower oneDNN's unpacked product, and would take torch's."""
    plain = (  # a float32 product on a CPU, with no gradient to record and no autocast to cast it
        x.device.type == "cpu"
        and x.dtype is torch.float32
        and weight.dtype is torch.float32
        and not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias)))
        and not torch.is_autocast_enabled("cpu")
    )
    if torch.compiler.is_compiling():
        return compiled_product(x, weight, bias) if plain else F.linear(x, weight, bias)
    quantized = int8_linear(x, weight, bias)
    if quantized is not None:
        return quantized
    if plain:
        return float32_product(x, weight, bias)
    return F.linear(x, autocast_operand(weight), autocast_operand(bias))


def float32_product(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x times weightᵀ plus bias, in float32 on a CPU, with no gradient: by oneDNN where `float32_kernel`
    chose it and the product has SMALL_PRODUCT multiply-adds or more, else by torch."""
    if x.numel() * weight.size(0) >= SMALL_PRODUCT and float32_kernel().name == "onednn":
        return onednn_linear(x, weight, bias)
    return F.linear(x, weight, bias)


@torch.library.custom_op("qkvmt::float32_product", mutates_args=())
def compiled_product(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """float32_product as an operator a compiled graph calls as it is."""
    return float32_product(x, weight, bias)


@compiled_product.register_fake
def _(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    return x.new_empty(*x.shape[:-1], weight.size(0))


class Linear(nn.Linear):
    """nn.Linear computing through `linear`: the same parameters, names and initialisation."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
