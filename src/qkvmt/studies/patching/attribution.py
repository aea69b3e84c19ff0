"""Attribution patching: the first-order estimate of what patching each slice would do, from one
forward and one backward pass of the corrupt sources (Nanda 2023; Syed et al. 2023):

    metric(patched) - metric(corrupt)  ≈  Σ_features  ∂metric/∂a · (a_clean - a_corrupt)

at each slice a (one head at one position of a named activation). The gradients are taken of the
activations alone (torch.autograd.grad), so the model's parameters gather none.
"""

import torch
from torch import Tensor

from qkvmt.analysis.hooking import hooked
from qkvmt.studies.patching.patching import Batch, Slot


def estimated(model, batch: Batch, index: Tensor, layout: list[Slot], clean: dict[str, Tensor], metric) -> dict:
    """{name: (len(index), H or 1, positions)} each slice's estimated change of the metric, for pairs `index`."""
    kept: dict[str, Tensor] = {}
    src, tgt_in = batch.rows(index, "corrupt")
    decoder_only = all(s.point.stack == "decoder" for s in layout)  # the corrupt encoder pass serves as it is
    memory = (batch.memory[0][index], batch.memory[1][index]) if decoder_only else None
    names = [s.name for s in layout]
    with torch.enable_grad(), hooked(model, None, kept.__setitem__, names):
        measured = batch.measured(model, index, metric, src, tgt_in, memory, "logits" in names)
        grads = torch.autograd.grad(measured.sum(), [kept[s.name] for s in layout])
    out = {}
    for slot, grad in zip(layout, grads):
        corrupt = kept[slot.name].detach()
        axis = slot.point.spec.axes.index(slot.axis)
        difference = clean[slot.name][index].narrow(axis, 0, corrupt.size(axis)) - corrupt
        change = (grad * difference).float().sum(-1)  # (B, H, P) or (B, P): the features summed
        out[slot.name] = change if slot.heads else change[:, None]
    return out


def attribution(model, batch: Batch, n: int, layout: list[Slot], clean: dict[str, Tensor], metric, size: int) -> dict:
    """estimated() over all n pairs, `size` pairs a pass: {name: [per pair (H or 1, positions)]}."""
    out: dict[str, list[Tensor]] = {s.name: [] for s in layout}
    for start in range(0, n, size):
        index = torch.arange(start, min(n, start + size), device=batch.at.device)
        for name, change in estimated(model, batch, index, layout, clean, metric).items():
            out[name] += list(change.detach())
    return out
