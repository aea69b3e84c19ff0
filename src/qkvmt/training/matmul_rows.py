"""Few matmul shapes for CPU training under bf16 autocast: every linear layer's rows padded up
to a multiple.

oneDNN runs a CPU's bf16 products. It builds a primitive for every shape it meets (rows, in,
out) and keeps up to ONEDNN_PRIMITIVE_CACHE_CAPACITY of them, each about 0.5 MB. Token-budget
batches give the linear layers B·S or B·T rows, a number that takes a few dozen values an epoch;
with a layer's forward and its two backward products, a few hundred primitives. Kept, they held
0.2-0.5 GB of every process and fragmented its heap; rebuilt each time, they cost 2-8 ms each on
a CPU with AMX, 12% of the CPU recipe's step.

The batches fill their token budget closely (most hold 2,024-2,048 of the CPU recipe's 2,048
padded tokens), so rows padded up to a multiple of 256 take two or three values, at a cost of
about 1% more products. The padding rows are zeros; they are cut from each output before
anything else reads it, so they change no value and receive no gradient. Attention's own
products (B·H batches of T × S) are left as they are: they are small and few.
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

LINEAR_ROW_MULTIPLE = 256  # training's default (module.linear_row_multiple)


class PadLinearRows(TorchFunctionMode):
    """Inside it, F.linear(x, w, b) (every nn.Linear) computes on x's rows padded with zeros up
    to a multiple of `multiple`, and returns the real rows: the same values, a few shapes."""

    def __init__(self, multiple: int):
        super().__init__()
        self.multiple = multiple

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear and args and args[0].dim() > 1 and args[0].size(-1):
            x = args[0]
            rows = x.numel() // x.size(-1)
            extra = -rows % self.multiple
            if extra:
                padded = F.pad(x.reshape(rows, x.size(-1)), (0, 0, 0, extra))  # (rows + extra, in)
                out = func(padded, *args[1:], **kwargs)  # (rows + extra, out)
                return out[:rows].view(*x.shape[:-1], out.size(-1))
        return func(*args, **kwargs)


def few_matmul_shapes(multiple: int):
    """PadLinearRows(multiple) where oneDNN builds the products (CPU bf16 autocast is on, as
    Lightning's bf16-mixed precision turns it on around a training step); elsewhere, and with
    multiple 0 or 1, nothing."""
    if multiple > 1 and torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16:
        return PadLinearRows(multiple)
    return contextlib.nullcontext()
