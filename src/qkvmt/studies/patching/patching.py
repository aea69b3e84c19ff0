"""Activation patching, batched: for each pair, each named activation, each head (where it has heads)
and each position, one forced pass of the corrupt source with that one slice taken from the clean
pass, and the metric it gives.

A patched pass is a row of a batch: the units of many pairs run together, each row's pair its own
(its corrupt source, the clean translation's prefix), and one hook per name writes the slices of the
rows patched at that name. A slice is one position of one head: the key axis of keys, values and
cross-attention's memory (a source position, or in decoder self-attention a target one), the query or
stream axis of the rest. Sites that also hold other positions (the weights, the scores, the mask: a
row of queries by keys) have no one position and are refused.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from qkvmt.analysis.hooking import hooked
from qkvmt.errors import UserError
from qkvmt.model.hook_names import HookPoint
from qkvmt.model.inputs import build_inputs
from qkvmt.studies.patching.pairs import Pair

FEATURES = {"d_k", "d_model", "ffn", "vocab"}
METRICS = ("log_prob", "logit_diff")


@dataclass(frozen=True)
class Slot:
    """Where a name is patched: its head axis (if any) and the axis of its positions."""

    name: str
    point: HookPoint
    axis: str  # "key", "query" or "position"

    @property
    def heads(self) -> bool:
        return "head" in self.point.spec.axes

    @property
    def side(self) -> str:
        return self.point.side(self.axis)

    def positions(self, pair: Pair) -> int:
        """How many positions the pair has on this slot's side: its source and </s>, or the target rows read."""
        return len(pair.clean_ids) + 1 if self.side == "source" else pair.position + 1


def slots(points: dict[str, HookPoint], names: list[str]) -> list[Slot]:
    """Each name's Slot, or a one-line UserError for a site without one position per slice."""
    out = []
    for name in names:
        axes = points[name].spec.axes
        axis = "key" if "key" in axes else "query" if "query" in axes else "position" if "position" in axes else None
        rest = set(axes) - {"batch", "head", axis}
        if axis is None or not rest <= FEATURES:
            raise UserError(
                f"names: {name} ({', '.join(axes)}) has no one position to patch; patch keys, values, queries, "
                "a head's output or the residual stream (e.g. decoder.*.cross.v, encoder.*.resid_post)"
            )
        out.append(Slot(name, points[name], axis))
    return out


def metric_of(metric):
    """metric(logits (R, V), clean token (R,), corrupt token (R,)) -> (R,): a name of METRICS, or the user's."""
    if callable(metric):
        return metric
    if metric == "log_prob":
        return lambda logits, clean, corrupt: logits.float().log_softmax(-1).gather(-1, clean[:, None])[:, 0]
    if metric == "logit_diff":
        return lambda logits, clean, corrupt: (logits.gather(-1, clean[:, None]) - logits.gather(-1, corrupt[:, None]))[
            :, 0
        ].float()
    raise UserError(f"metric={metric!r}: use one of {', '.join(METRICS)}, or fn(logits, clean, corrupt) -> values")


class Batch:
    """The pairs' forced inputs, padded once: clean and corrupt sources, and the clean prefixes."""

    def __init__(self, model, pairs: list[Pair]):
        c, device = model.cfg, next(model.parameters()).device
        prefixes = [p.prefix for p in pairs]
        clean = build_inputs([p.clean_ids for p in pairs], prefixes, c.specials, c.max_positions)
        corrupt = build_inputs([p.corrupt_ids for p in pairs], prefixes, c.specials, c.max_positions)
        self.clean, self.corrupt = clean.src.to(device), corrupt.src.to(device)
        self.tgt_in = clean.tgt_in.to(device)
        self.at = torch.tensor([p.position for p in pairs], device=device)  # the row each metric reads
        self.clean_token = torch.tensor([p.clean_token for p in pairs], device=device)
        self.corrupt_token = torch.tensor([p.corrupt_token for p in pairs], device=device)
        self.src_len = torch.tensor([len(p.clean_ids) + 1 for p in pairs], device=device)
        self.memory: tuple[Tensor, Tensor] | None = None  # the corrupt sources' encoder output and mask (clean_pass)

    def rows(self, index: Tensor, source: str = "corrupt") -> tuple[Tensor, Tensor]:
        """The inputs of pairs `index`, trimmed to their longest source and prefix."""
        src = getattr(self, source)[index][:, : int(self.src_len[index].max())]
        return src, self.tgt_in[index][:, : int(self.at[index].max()) + 1]

    def measured(self, model, index: Tensor, metric, src: Tensor, tgt_in: Tensor, memory=None, logits=False) -> Tensor:
        """The forced pass of pairs `index` (src, tgt_in) and its metric (R,). Only the row each metric reads
        goes through the output layer, the costliest matrix product, unless `logits` (a hook is on them).
        memory: the pairs' encoder output and source mask, where no hook is on the encoder: only the
        decoder runs."""
        if memory is None:
            out, _ = model(src, tgt_in, project=logits)
        else:
            out, _, _ = model.decode(tgt_in, memory[0], memory[1], project=logits)
        at_row = out[torch.arange(out.size(0), device=out.device), self.at[index]]  # (R, V) or (R, D)
        return metric(at_row if logits else model.output(at_row), self.clean_token[index], self.corrupt_token[index])


def run(
    model, batch: Batch, index: Tensor, metric, source: str, hooks=None, read=None, reads=(), memory=None
) -> Tensor:
    """One forced pass of pairs `index` from the `source` ("clean" or "corrupt") side; the metric (R,).
    memory: every pair's encoder output and source mask (Batch.measured)."""
    src, tgt_in = batch.rows(index, source)
    rows = (memory[0][index], memory[1][index]) if memory is not None else None
    with hooked(model, hooks, read, reads):
        return batch.measured(model, index, metric, src, tgt_in, rows, "logits" in {*(hooks or {}), *reads})


@torch.inference_mode()
def clean_pass(model, batch: Batch, n: int, names: list[str], metric) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """Each name's clean activations (n, ...), and the metric of the clean and corrupt passes (n,) each."""
    kept: dict[str, Tensor] = {}
    index = torch.arange(n, device=batch.at.device)
    clean = run(model, batch, index, metric, "clean", read=lambda name, t: kept.__setitem__(name, t), reads=names)
    # The corrupt sources' encoder pass, kept: a slice of the decoder leaves it as it is, so neither
    # method runs it again for one (the encoder reads the whole source, the decoder only the prefix).
    batch.memory = model.encode(batch.corrupt)[:2]
    return kept, clean, run(model, batch, index, metric, "corrupt", memory=batch.memory)


def units(pairs: list[Pair], layout: list[Slot], n_heads: int) -> list[tuple[int, int, int, int]]:
    """Every (pair, slot, head, position) to patch; head 0 alone where a slot has no heads."""
    return [
        (p, s, h, i)
        for p, pair in enumerate(pairs)
        for s, slot in enumerate(layout)
        for h in range(n_heads if slot.heads else 1)
        for i in range(slot.positions(pair))
    ]


def _writer(slot: Slot, rows: Tensor, heads: Tensor, positions: Tensor, values: Tensor):
    def write(t: Tensor, ctx) -> Tensor:  # (B, H, P, d) or (B, P, d): one slice per row patched here
        t = t.clone()
        t[(rows, heads, positions) if slot.heads else (rows, positions)] = values.to(t.dtype)
        return t

    return write


@torch.inference_mode()
def patched(model, batch: Batch, all_units, layout: list[Slot], clean: dict[str, Tensor], metric, size: int) -> Tensor:
    """The metric of each unit's patched pass (len(all_units),), `size` rows a pass."""
    device = batch.at.device
    table = torch.tensor(all_units, device=device)  # (U, 4): pair, slot, head, position
    out = torch.empty(len(all_units), device=device)
    in_decoder = torch.tensor([slot.point.stack == "decoder" for slot in layout], device=device)[table[:, 1]]
    for group, shared in ((~in_decoder).nonzero()[:, 0], None), (in_decoder.nonzero()[:, 0], batch.memory):
        for start in range(0, len(group), size):
            at = group[start : start + size]
            chunk = table[at]
            hooks = {}
            for s, slot in enumerate(layout):
                mine = (chunk[:, 1] == s).nonzero()[:, 0]
                if not mine.numel():
                    continue
                pair, head, position = chunk[mine, 0], chunk[mine, 2], chunk[mine, 3]
                source = clean[slot.name]
                values = source[pair, head, position] if slot.heads else source[pair, position]
                hooks[slot.name] = [_writer(slot, mine, head, position, values)]
            out[at] = run(model, batch, chunk[:, 0], metric, "corrupt", hooks, memory=shared)
    return out
