"""Where a loaded model runs, and in which precision: what `qkvmt.load(device=, precision=)` asks of
Lightning Fabric. Float32 on the CPU needs nothing of Lightning (its Fabric only moves the model there
and computes as it is), and importing Lightning costs seconds and about 200 MiB at its peak, as much as
the weights of an OPUS-MT model; so that case is placed here, and every other asks Lightning.
"""

import contextlib
import importlib.util

import torch

FLOAT32 = ("32-true", "32", 32)  # Lightning's names of float32 computing, as its Fabric converts them


class CPUPlacement:
    """What qkvmt reads of a Fabric (device, to_device, autocast), for float32 on the CPU."""

    device = torch.device("cpu")
    precision = "32-true"

    def to_device(self, module: torch.nn.Module) -> torch.nn.Module:
        return module.to(self.device)

    def autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # float32: as Fabric's, no autocast


def placement(accelerator="auto", precision="32-true"):
    """A CPUPlacement where Lightning's Fabric(accelerator, devices=1, precision) would compute in float32 on
    the CPU; that Fabric otherwise."""
    if precision in FLOAT32 and _on_cpu(accelerator):
        return CPUPlacement()
    import lightning as L

    return L.Fabric(accelerator=accelerator, devices=1, precision=precision)


def precision_of(fabric) -> str:
    """The precision a placement computes in, by Lightning's name of it."""
    return fabric.precision if isinstance(fabric, CPUPlacement) else fabric.strategy.precision.precision


def _on_cpu(accelerator) -> bool:
    """Whether Lightning's accelerator would be the CPU: "cpu", or "auto" where it finds no TPU, Apple GPU
    or CUDA device (its own order); anything uncertain is left to Lightning."""
    if accelerator == "cpu":
        return True
    return (
        accelerator == "auto"
        and importlib.util.find_spec("torch_xla") is None
        and not torch.backends.mps.is_available()
        and torch.cuda.device_count() == 0
    )
