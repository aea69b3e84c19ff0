"""Signals: what a view shows of how each key (or source token) mattered to each query (or
target token), computed from one traced forced pass (qkvmt.analysis.trace).

A signal is a name, a label, the kinds of attention it covers and a function from a `Context`
(the trace, and what several signals share, computed once) to a `SignalMaps` per kind. Views,
the alignment policy, align.py's leaderboard, heads.py, the explorer and the API list the
signals from `SIGNALS`; a new signal is one module in this package that calls `register`, and
one import line at the end of this file.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from qkvmt.analysis.alti import Contributions, alti_plus
from qkvmt.analysis.trace import KINDS, Trace
from qkvmt.analysis.value_norms import every_transformed_value
from qkvmt.model.transformer import Transformer


@dataclass(frozen=True)
class SignalMaps:
    """One signal's numbers for one kind of one sentence.

    heads: (L, H, rows, cols), each head's own, or None where the signal has no per-head reading.
    layers: (L, rows, cols), each layer as a whole; a signal of the whole model (a gradient)
    has L = 1. Rows and columns are those of the kind's attention (qkvmt.results.sentence_attention
    .row_col_labels): cross-attention rows predict tgt_out, columns are the source tokens."""

    heads: np.ndarray | None
    layers: np.ndarray

    @property
    def whole_model(self) -> bool:
        return self.heads is None and self.layers.shape[0] == 1


class Intermediates:
    """What several signals read of one pass that predicts, each computed once, on first use."""

    def __init__(self, traced: Trace):
        self.traced = traced
        self._transformed_values: dict[str, list[Tensor]] | None = None
        self._contributions: Contributions | None = None

    @property
    def transformed_values(self) -> dict[str, list[Tensor]]:
        """W_O^h v_j of every layer of every kind (qkvmt.analysis.value_norms.every_transformed_value)."""
        if self._transformed_values is None:
            self._transformed_values = every_transformed_value(self.traced)
        return self._transformed_values

    @property
    def contributions(self) -> Contributions:
        """ALTI+ (qkvmt.analysis.alti.Contributions) of the pass."""
        if self._contributions is None:
            self._contributions = alti_plus(self.traced, self.transformed_values)
        return self._contributions

    @property
    def computed_contributions(self) -> Contributions | None:
        """ALTI+'s contributions if a signal has computed them, else None: reading them is free,
        computing them is not."""
        return self._contributions


class Context:
    """What signals read for one sentence (batch row 0): the model, the trace of its forced pass,
    the ids each target row predicts, and the intermediates several signals share (`shared`).

    rows: the target rows a reader will look at, or None for all. A signal whose cost grows with
    the rows it scores (a gradient signal: passes per row) may compute only these and leave the
    others NaN; a signal read from the trace fills every row whatever rows says."""

    def __init__(
        self,
        model: Transformer,
        traced: Trace,
        tgt_out: Tensor,
        rows: list[int] | None = None,
        shared: Intermediates | None = None,
    ):
        self.model, self.traced, self.tgt_out = model, traced, tgt_out  # tgt_out (B, T)
        self.rows = rows
        self.shared = Intermediates(traced) if shared is None else shared

    def reading(self, traced: Trace) -> "Context":
        """The same sentence over `traced`, another reading of this pass (some sites replaced, as
        the full-context reading replaces a layer's weights) that shares this context's
        intermediates: W_O v and ALTI+'s contributions stay those of the pass that predicts."""
        return Context(self.model, traced, self.tgt_out, self.rows, self.shared)

    @property
    def transformed_values(self) -> dict[str, list[Tensor]]:
        return self.shared.transformed_values

    @property
    def contributions(self) -> Contributions:
        return self.shared.contributions


@dataclass(frozen=True)
class Signal:
    name: str  # as settings and URLs write it: alignment.signal=value_norms
    label: str  # as pages show it
    kinds: tuple[str, ...]  # the kinds of attention it has maps of
    compute: Callable[[Context], dict[str, SignalMaps]]
    cost: str = "pass"  # "pass": about a forced pass; "passes": many (computed only when asked for)
    # The columns the studies also read it without (the AER leaderboard's rows, faithfulness's
    # readings), each row renormalized: the sinks that take its mass (qkvmt.text.sinks).
    sinks: tuple[str, ...] = ()

    def __call__(self, context: Context) -> dict[str, SignalMaps]:
        return self.compute(context)


SIGNALS: dict[str, Signal] = {}


def register(signal: Signal) -> Signal:
    if signal.name in SIGNALS:
        raise ValueError(f"a signal named {signal.name!r} is registered already")
    if not signal.kinds or set(signal.kinds) - set(KINDS):
        raise ValueError(f"signal {signal.name!r}: kinds must be some of {KINDS}")
    SIGNALS[signal.name] = signal
    return signal


def cross_signals() -> list[str]:
    """The registered signals with cross-attention maps (what a policy and faithfulness read), in
    registry order."""
    return [name for name, signal in SIGNALS.items() if "cross" in signal.kinds]


def stacked(tensors: list[Tensor]) -> np.ndarray:
    """Per-layer tensors of batch row 0, (1, ...) each -> (L, ...) float32 on the host. Detached:
    products with the model's weights carry a graph when gradients are on."""
    return torch.stack([t[0] for t in tensors]).detach().float().cpu().numpy()


# One line per signal module: importing it registers the signal, so this order is the registry's
# (weights first), which pages, errors and the defaults follow: the import sorter leaves it alone.
# isort: off
from qkvmt.analysis.signals import attention_weights, value_norms, alti, rollout, value_zeroing, gradients  # noqa: E402,F401
# isort: on
