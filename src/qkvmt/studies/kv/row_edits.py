"""Edits of cross-attention keys and values whose source positions differ from one batch row to
the next, so that one search over a batch edits each sentence at its own words.

They are site functions for qkvmt.analysis.trace.edited, in forced passes and in search alike:
cross-attention's K and V sites hold one row per sentence in both (search computes them once
per sentence, and a sentence's beams share them), so row i of the site is sentence i of the
batch whatever the beam width.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from qkvmt.analysis.edits import SITES_OF, exchanged
from qkvmt.analysis.trace import Edit, Where


def _rows(t: Tensor, positions: Tensor) -> Tensor:
    if t.size(0) != positions.size(0):
        raise ValueError(f"an edit of {positions.size(0)} rows was given a site of {t.size(0)} rows")
    return torch.arange(t.size(0), device=t.device)


def swap_rows(a: Tensor, b: Tensor) -> Edit:
    """Row i's source positions a[i] and b[i] trade places, every head: a (B,), b (B,)."""

    def swap(t: Tensor) -> Tensor:  # (B, H, S, d_k)
        _rows(t, a)
        return exchanged(t, a, b)

    return swap


def patch_rows(positions: Tensor, donor: Tensor) -> Edit:
    """Row i's source position positions[i] takes the donor's row i there, every head:
    positions (B,), donor (B, H, S', d_k) the same site of the donor sentences' pass."""

    def patch(t: Tensor) -> Tensor:  # (B, H, S, d_k)
        rows = _rows(t, positions)
        out = t.clone()
        out[rows, :, positions] = donor[rows, :, positions].to(t.dtype)  # (B, H, d_k)
        return out

    return patch


def at_sites(part: str, layers: list[int], edit_of: Callable[[int, str], Edit]) -> dict[Where, Edit]:
    """The site functions of an edit of `part` (keys, values or both) in cross-attention `layers`:
    edit_of(layer, site) for each site, "k" or "v", the part names."""
    return {("cross", i, s): edit_of(i, s) for i in layers for s in SITES_OF[part]}
