"""The key-value cache of incremental decoding: each attention layer's keys and values, kept
across decoding steps so that a step projects only its new token."""

import torch
from torch import Tensor


class KVCache:
    """Keys and values of one attention layer, kept across decoding steps.

    Self-attention appends one step's K, V at a time into a buffer that grows by doubling, so a
    step copies only the new token. Cross-attention fills it once per source sentence.
    Beam search reorders rows every step; the filled part is gathered into a second buffer of
    the same size, and the two swap, so reordering allocates nothing.
    """

    def __init__(self, capacity: int = 16):
        self.capacity = capacity  # positions the first append makes room for (a search that knows its length
        # limit asks for all of them: then the buffer never grows, and a compiled step sees one buffer throughout)
        self.k: Tensor | None = None  # (B, H, capacity, d_k)
        self.v: Tensor | None = None
        self.spare: tuple[Tensor, Tensor] | None = None  # reorder target, same shape as k and v
        self.length = 0

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        t = k.size(2)
        if self.k is None or self.length + t > self.k.size(2):
            capacity = max(2 * (self.length + t), self.capacity)
            grown_k = k.new_empty(k.size(0), k.size(1), capacity, k.size(3))
            grown_v = v.new_empty(grown_k.shape)
            if self.k is not None:
                grown_k[:, :, : self.length] = self.k[:, :, : self.length]
                grown_v[:, :, : self.length] = self.v[:, :, : self.length]
            self.k, self.v, self.spare = grown_k, grown_v, None
        self.k[:, :, self.length : self.length + t] = k
        self.v[:, :, self.length : self.length + t] = v
        self.length += t
        return self.get()

    def add_rows(self, k: Tensor, v: Tensor | None, keep: Tensor | None = None) -> None:
        """Rows k, v (B', H, T', d_k) join after the cached ones (v None: as zeros), the shorter side padded
        with zeros to the longer length: the caller's mask leaves the padding out (zeros, not empty memory,
        since a masked key must still score a number). keep: only these cached rows stay, in the same copy."""
        if self.k is None:
            if k.size(2):
                self.append(k, v)
            return
        n, t, length = self.k.size(0) if keep is None else keep.numel(), k.size(2), max(self.length, k.size(2))
        shape = (n + k.size(0), self.k.size(1), max(self.k.size(2), length), self.k.size(3))
        grown_k, grown_v = self.k.new_empty(shape), self.v.new_empty(shape)
        for grown, old, new in ((grown_k, self.k, k), (grown_v, self.v, v)):
            if keep is None:
                grown[:n, :, : self.length] = old[:, :, : self.length]
            else:
                torch.index_select(old[:, :, : self.length], 0, keep, out=grown[:n, :, : self.length])
            grown[:n, :, self.length : length] = 0
            grown[n:, :, t:length] = 0
            grown[n:, :, :t] = new if new is not None else 0
        self.k, self.v, self.spare, self.length = grown_k, grown_v, None, length

    def drop_slots(self, n: int) -> None:
        """The first n positions leave (no row reads them any more)."""
        self.k, self.v, self.spare = self.k[:, :, n:], self.v[:, :, n:], None
        self.length -= n

    def get(self) -> tuple[Tensor, Tensor]:
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def copy_rows(self, dst: Tensor, src: Tensor) -> None:
        """Rows `dst` take the keys and values of rows `src` (all sources are read first)."""
        for buf in (self.k, self.v):
            part = buf[:, :, : self.length]
            part.index_copy_(0, dst, part.index_select(0, src))

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search reorders hypotheses every step); the number of
        rows may change (after the first step of beam search, B rows become B*K)."""
        if self.k is None:
            return
        if torch.is_grad_enabled() and self.k.requires_grad:  # out= cannot record autograd
            self.k, self.v, self.spare = self.k.index_select(0, index), self.v.index_select(0, index), None
            return
        if self.spare is None or self.spare[0].size(0) != index.numel():
            shape = (index.numel(), *self.k.shape[1:])
            self.spare = (self.k.new_empty(shape), self.v.new_empty(shape))
        n = self.length
        spare_k, spare_v = self.spare
        torch.index_select(self.k[:, :, :n], 0, index, out=spare_k[:, :, :n])
        torch.index_select(self.v[:, :, :n], 0, index, out=spare_v[:, :, :n])
        self.spare = (self.k, self.v)
        self.k, self.v = spare_k, spare_v
