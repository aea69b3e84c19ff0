"""Parameters cast to autocast's dtype once a search, not once a step.

Under autocast (Lightning's bf16-mixed, or decode.compute_type=bfloat16) every linear layer casts
its float32 weight and bias to bfloat16 at every call. In training that is a small part of a large
product. In a search it is not: each step runs every layer on a few rows, so the casts read and
write the whole model every step (on 2 cores with AMX, 1.2 ms of a 5 ms step over 5 rows, a
third of it the output layer's; measured).

Inside `cast_once()`, a parameter (or a view of one, as attention's slices of its stacked
projection are) that autocast would cast is cast on first use and the cast reused while the
parameter is unchanged: its version counter, which every in-place operation on it bumps, is
checked at each use (a write through `.data` bypasses it: a search's model is not written so).
It is the cast autocast makes (a rounding to nearest), so every value is the same; the casts are
dropped when the block ends. Outside the block, with gradients recorded, or inside
torch.compile, nothing changes.
"""

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import torch
from torch import Tensor, nn
from torch.utils.weak import WeakIdKeyDictionary

# parameter -> (its version when cast, the cast); None outside cast_once. Per thread: a server's
# threads may search at once, and one leaving its block must not end another's.
_kept: ContextVar[WeakIdKeyDictionary | None] = ContextVar("qkvmt_weight_casts", default=None)


@contextlib.contextmanager
def cast_once() -> Iterator[None]:
    """Within it, `autocast_operand` reuses the casts it made (a search's steps share them)."""
    token = _kept.set(_kept.get() if _kept.get() is not None else WeakIdKeyDictionary())
    try:
        yield
    finally:
        _kept.reset(token)


def autocast_operand(t: Tensor | None) -> Tensor | None:
    """`t` as autocast would give it to a product: in cast_once() and under autocast with no
    gradient, a float32 parameter or view of one comes cast, from the casts kept; any other
    tensor, and every tensor elsewhere, is returned as it is (autocast then casts it itself)."""
    if torch.compiler.is_compiling():  # first: a compiled graph must not break on the lookup below
        return t
    casts = _kept.get()
    if casts is None or t is None or t.dtype is not torch.float32 or torch.is_grad_enabled():
        return t
    device = t.device.type
    if device not in ("cpu", "cuda") or not torch.is_autocast_enabled(device):
        return t
    base = t if isinstance(t, nn.Parameter) else t._base
    if (
        not isinstance(base, nn.Parameter)
        or base.dtype is not torch.float32
        or base.is_inference()
        or not base.is_contiguous()
    ):
        return t  # an inference tensor keeps no version counter to tell a change by
    dtype = torch.get_autocast_dtype(device)
    kept = casts.get(base)
    if kept is None or kept[0] != base._version or kept[1].dtype != dtype:
        kept = casts[base] = (base._version, base.detach().to(dtype))
    cast = kept[1]
    return cast if t is base else cast.as_strided(t.size(), t.stride(), t.storage_offset() - base.storage_offset())
