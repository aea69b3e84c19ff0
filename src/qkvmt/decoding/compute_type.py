"""What a search computes in (decode.compute_type, named as CTranslate2 names them).

- `float32`: as the caller computes: a model loaded with fabric.precision=bf16-mixed keeps its
  autocast, as it always has.
- `bfloat16`: every step under autocast to bfloat16 (products and attention in bfloat16, the
  parameters cast once a search: qkvmt.model.weight_casts; normalisation and softmax in float32),
  over a caller's autocast if there is one. Only where the device computes bfloat16 natively (a CPU
  with AVX512-BF16 or AMX, a GPU from Ampere on): elsewhere it would be emulated, slower than float32.
- `int8`: the linear layers' weights in int8 (qkvmt.model.weight_int8), on a CPU with one of torch's
  x86 quantized engines; the rest in float32, a caller's autocast set aside for the search.

A pass that records gradients (analysis with gradients) is computed in float32 whatever the setting.
"""

import contextlib
from collections.abc import Iterator

import torch

from qkvmt.errors import UserError
from qkvmt.model.weight_int8 import ENGINES, int8_weights

COMPUTE_TYPES = ("float32", "bfloat16", "int8")


def native_bfloat16(device: torch.device) -> bool:
    if device.type == "cpu":
        return torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def check_int8(device: torch.device) -> None:
    if device.type != "cpu":
        raise UserError(
            f"decode.compute_type=int8 computes on a CPU, and the model is on {device.type}: "
            "use decode.compute_type=float32 or bfloat16, or fabric.accelerator=cpu"
        )
    engine = torch.backends.quantized.engine
    if engine not in ENGINES:
        raise UserError(
            f"decode.compute_type=int8 needs one of torch's quantized engines {', '.join(ENGINES)} "
            f"(torch's engine here is {engine}): use decode.compute_type=float32"
        )


@contextlib.contextmanager
def computing(compute_type: str, device: torch.device) -> Iterator[None]:
    """A search on `device` computes in `compute_type` within the block; a UserError where it cannot."""
    if compute_type == "bfloat16":
        if not native_bfloat16(device):
            what = "CPU" if device.type == "cpu" else device.type
            raise UserError(
                f"decode.compute_type=bfloat16: this {what} has no native bfloat16 arithmetic: "
                "use decode.compute_type=float32 (or int8 on a CPU)"
            )
        with torch.autocast(device.type, dtype=torch.bfloat16):
            yield
    elif compute_type == "int8":
        check_int8(device)
        with torch.autocast(device.type, enabled=False), int8_weights():
            yield
    else:
        yield
