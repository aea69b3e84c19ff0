"""Where a search of this thread is: what a hook inside it needs to know of the rows it sees.

A search's rows are beams of sentences, and sentences that are done leave its batch
(qkvmt.decoding.search), so row i at one step may be another sentence than at the first. Each step
says here which step it is, which sentence of the call and which beam each row is, and the tokens
so far; the encoder's pass says which sentence each row is. The analysis's hooks read it
(qkvmt.analysis.hooking). It is the calling thread's own, as the hooks are.
"""

import contextlib
import threading
from dataclasses import dataclass

import torch
from torch import Tensor

_local = threading.local()


@dataclass(frozen=True)
class StepView:
    sentence_of: Tensor  # (b,) the sentence of the call (its index among the lines given) each one of the batch is
    width: int  # rows per sentence: its live beams (1 in greedy search, the encoder and a first step)
    step: int | None = None  # the output token this step chooses, from 0; None: the encoder's pass
    prefix: Tensor | None = None  # (b * width, step + 1) BOS and the tokens so far; None in the encoder's pass

    @property
    def sentences(self) -> Tensor:
        """(rows,) the sentence of the call each row decodes."""
        return self.sentence_of.repeat_interleave(self.width)

    @property
    def beams(self) -> Tensor:
        """(rows,) which beam of its sentence each row is."""
        return torch.arange(self.width, device=self.sentence_of.device).repeat(self.sentence_of.numel())


def current() -> StepView | None:
    """The step a search of this thread is at; None outside a search."""
    return getattr(_local, "view", None)


@contextlib.contextmanager
def searching(sentence_of: Tensor):
    """A search of the sentences `sentence_of` (indices into the call's lines) while the block is open;
    `at` says where it is."""
    before = getattr(_local, "view", None)
    _local.view = StepView(sentence_of, 1)
    try:
        yield
    finally:
        _local.view = before


def at(sentence_of: Tensor, width: int, step: int, prefix: Tensor) -> None:
    """The search of this thread is now at `step`, over these sentences and rows (within `searching`
    only: a search run on its own says nothing)."""
    if getattr(_local, "view", None) is not None:
        _local.view = StepView(sentence_of, width, step, prefix)


def sentences_searched(b: int, device) -> Tensor:
    """(b,) the sentences of the call a search of b sentences decodes: those `searching` named, or 0..b-1."""
    view = current()
    return view.sentence_of if view is not None else torch.arange(b, device=device)
