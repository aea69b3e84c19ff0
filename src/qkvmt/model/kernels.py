"""Which fused attention kernel training pins: SDPA's backends by name, and the choice "auto"
makes per device. Decoding pins none (see `attention_kernel`)."""

import contextlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from qkvmt.errors import UserError

SDPA_BACKENDS = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def attention_kernel(name: str | None, device: torch.device):
    """A context pinning SDPA's kernel for training: "math", "flash", "efficient", "cudnn"; None
    lets torch choose; "auto" picks "math" on CPU, where it trains over twice as fast as the
    fused CPU kernel on sentence-length rows (whose backward is slow there), and leaves GPUs to
    torch. Decoding pins nothing: there the fused kernel reads a 256-token KV cache slice over
    6× faster than "math", which copies it first."""
    if name == "auto":
        name = "math" if device.type == "cpu" else None
    if name is None:
        return contextlib.nullcontext()
    if name not in SDPA_BACKENDS:
        raise UserError(f"unknown SDPA backend {name!r}: use auto, null or one of {', '.join(SDPA_BACKENDS)}")
    return sdpa_kernel(SDPA_BACKENDS[name])
