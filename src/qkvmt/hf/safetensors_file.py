"""A safetensors file read one tensor at a time with plain reads, each straight into memory the caller
owns (a parameter, or a block of rows of one).

safetensors' own safe_open maps the file and gives views of the mapping: a model built of them keeps
the file's pages in its resident memory, and a model that copies out of them holds the mapped pages
and its own at once, twice the weights at the end of an import. A read() leaves the file's pages in
the system's cache, out of the process's memory, and the model's parameters are its own (a file
rewritten under a running model, an export to the folder it came from, cannot change it).

The format (https://huggingface.co/docs/safetensors): 8 bytes, the header's length, little-endian; the
header, a JSON object of {name: {dtype, shape, data_offsets: [begin, end]}} (and __metadata__); then the
data, each tensor's bytes little-endian and row-major at its offsets from the header's end.
"""

import json
import math
from pathlib import Path

import torch
from torch import Tensor

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
LENGTH = 8  # bytes of the header's length


class SafetensorsFile:
    """The tensors of one safetensors file: their names, dtypes and shapes from its header, their values
    read when asked for. A header that is no such object, or a tensor whose bytes are not its shape's, is
    a ValueError (the import names the file)."""

    def __init__(self, path: Path):
        self.path = path
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(LENGTH), "little")
            header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise ValueError("its header is not a JSON object")
        header.pop("__metadata__", None)
        self.start = LENGTH + n
        self.entries = {name: entry(name, e) for name, e in header.items()}

    def keys(self):
        return self.entries.keys()

    def meta(self, name: str) -> Tensor:
        """The tensor's dtype and shape, as a tensor on the meta device: nothing is read."""
        dtype, shape, _ = self.entries[name]
        return torch.empty(shape, dtype=dtype, device="meta")

    def read_into(self, name: str, out: Tensor) -> None:
        """Fills `out` (contiguous, as many values) with the tensor's, converted to out's dtype: read in
        place where the dtypes are one, else through a buffer of this tensor alone."""
        dtype, shape, (begin, end) = self.entries[name]
        if out.numel() != math.prod(shape) or not out.is_contiguous():
            raise ValueError(f"{name} is {tuple(shape)}, read into {tuple(out.shape)}")
        target = out if out.dtype == dtype else torch.empty(shape, dtype=dtype)
        buffer = target.reshape(-1).view(torch.uint8).numpy()  # the tensor's own bytes
        with open(self.path, "rb") as f:
            f.seek(self.start + begin)
            if f.readinto(buffer) != end - begin:
                raise ValueError(f"the file ends inside {name}")
        if target is not out:
            out.copy_(target.view(out.shape))

    def read(self, name: str) -> Tensor:
        """The tensor itself, in its own dtype and shape."""
        out = torch.empty_like(self.meta(name), device="cpu")
        self.read_into(name, out)
        return out


def entry(name: str, e) -> tuple[torch.dtype, list[int], tuple[int, int]]:
    """(dtype, shape, (begin, end)) of the header's entry `e` for `name`, checked against one another."""
    if not isinstance(e, dict) or e.get("dtype") not in DTYPES:
        raise ValueError(f"{name} has no dtype qkvmt reads ({', '.join(DTYPES)})")
    dtype, shape, offsets = DTYPES[e["dtype"]], e.get("shape"), e.get("data_offsets")
    if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise ValueError(f"{name}'s shape is {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(n, int) for n in offsets)):
        raise ValueError(f"{name}'s data_offsets are {offsets!r}")
    begin, end = offsets
    if not 0 <= begin <= end or end - begin != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"{name}'s data_offsets {offsets} do not hold its shape {shape}")
    return dtype, shape, (begin, end)
