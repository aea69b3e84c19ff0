"""Linear layers with int8 weights for a search (decode.compute_type=int8), as CTranslate2's int8.

Inside `int8_weights()`, `int8_linear` computes a linear layer with torch's dynamic quantization,
as torch.ao.quantization.quantize_dynamic with per_channel_dynamic_qconfig does: each weight is
rounded to int8 with a scale per output row (symmetric, from the row's largest magnitude), each
input is rounded to uint8 as it comes (a scale per call, over 7 bits: torch's reduce_range, which
keeps every x86 CPU's int8 kernels from saturating), the product is taken in integers and comes
back float32, bias added. The input's scale is one for the whole call, all rows of the batch: a
sentence may translate otherwise alone than among others (9 of 40 test sentences of the bundled
German-English model did), where CTranslate2 scales each row. Every linear layer of the model is
computed so, the output layer (the vocabulary projection) included: on the bundled models it is
the costliest product of a step, int8 takes half of float32's time there (200 rows), and the test
set's BLEU holds (measured: 41.8 for float32's 42.1 German-English, 40.0 for 39.6 English-German).

A weight is packed (rounded and laid out for the engine's kernels) on first use and the packing
kept while the parameter lives and is unchanged (its version counter, which every in-place
operation bumps, is checked at each use; a write through `.data` bypasses it), so the searches
of one model share it: packing a bundled model takes a few tenths of a second on 2 cores, which each short
request to a server, or each batch of a file, would pay again if packed once a search. A view of a
parameter (attention's rows of its stacked projection) is packed per view, keyed by its place.
A weight that is no parameter nor view of one (rows picked by an index tensor, which copies
them) is computed in float32, as is everything outside the block, with gradients recorded, or
off the CPU.
"""

import contextlib
import warnings
from collections.abc import Iterator
from contextvars import ContextVar

import torch
from torch import Tensor, nn
from torch.ao.quantization import default_per_channel_weight_observer
from torch.utils.weak import WeakIdKeyDictionary

ENGINES = ("x86", "fbgemm", "onednn")  # torch's quantized engines with per-channel int8 linear kernels on a CPU

# Per thread (a server's threads may search at once with different settings): True inside int8_weights.
_active: ContextVar[bool] = ContextVar("qkvmt_int8_weights", default=False)
# parameter -> {(place of the view, its bias): (versions when packed, bias parameter, packed weight)}
_packed = WeakIdKeyDictionary()


@contextlib.contextmanager
def int8_weights() -> Iterator[None]:
    """Within it, `int8_linear` computes linear layers with int8 weights."""
    token = _active.set(True)
    try:
        yield
    finally:
        _active.reset(token)


def parameter_of(t: Tensor | None) -> nn.Parameter | None:
    """The parameter `t` is or is a view of, where it is one that keeps a version counter."""
    base = t if isinstance(t, nn.Parameter) else getattr(t, "_base", None)
    if not isinstance(base, nn.Parameter) or base.dtype is not torch.float32 or base.is_inference():
        return None
    return base


def pack(weight: Tensor, bias: Tensor | None) -> object:
    """`weight` rounded to int8 per output row and packed with `bias` for the engine's kernels."""
    observer = default_per_channel_weight_observer()
    observer(weight)
    scale, zero_point = observer.calculate_qparams()
    with (
        warnings.catch_warnings()
    ):  # torch 2.13 announces the move of quantized tensors to torchao: not the user's concern
        warnings.filterwarnings("ignore", "torch.quantize_per_tensor", UserWarning)
        rounded = torch.quantize_per_channel(weight, scale.double(), zero_point.long(), 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(rounded, bias)


def int8_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor | None:
    """F.linear(x, weight, bias) with `weight` in int8, inside int8_weights() for a float32 CPU
    product without gradients of a parameter or a view of one; None anywhere else."""
    if not _active.get() or torch.is_grad_enabled() or x.device.type != "cpu" or x.dtype is not torch.float32:
        return None
    base, bias_base = parameter_of(weight), parameter_of(bias)
    if base is None or (bias is not None and bias_base is None):
        return None
    place = (weight.storage_offset() - base.storage_offset(), tuple(weight.shape), weight.stride())
    bias_place = None if bias is None else (id(bias_base), bias.storage_offset() - bias_base.storage_offset())
    versions = (base._version, None if bias is None else bias_base._version)
    kept = _packed.setdefault(base, {})
    entry = kept.get((place, bias_place))
    if entry is None or entry[0] != versions or entry[1] is not bias_base:
        detached = None if bias is None else bias.detach()
        entry = kept[place, bias_place] = (versions, bias_base, pack(weight.detach(), detached))
    return torch.ops.quantized.linear_dynamic(x, entry[2], reduce_range=True)
