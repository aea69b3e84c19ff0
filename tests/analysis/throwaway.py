"""Signals registered for one test and removed after it: whatever lists signals (the forced pass,
the views, the policy, the leaderboard, the explorer) must show them with no edit of its own.
Their maps are known answers, made from the weights' own."""

from contextlib import contextmanager

from qkvmt.analysis.signals import SIGNALS, Signal, SignalMaps, register
from qkvmt.analysis.trace import KINDS

PER_LAYER, WHOLE, SLOW = "probe_layers", "probe_whole", "probe_slow"


def per_layer(context) -> dict[str, SignalMaps]:
    """Every kind, one map per layer and none per head: twice the weights' layer maps."""
    return {kind: SignalMaps(None, 2 * maps.layers) for kind, maps in SIGNALS["weights"](context).items()}


def whole_model(context) -> dict[str, SignalMaps]:
    """Cross-attention only, one map of the whole model: the last layer's average weights."""
    return {"cross": SignalMaps(None, SIGNALS["weights"](context)["cross"].layers[-1:])}


@contextmanager
def throwaway_signals():
    """Registers probe_layers, probe_whole and probe_slow (cost "passes": computed only when
    named; it counts its calls in `calls`), and unregisters them however the block ends."""
    calls = []

    def slow(context):
        calls.append(context)
        return whole_model(context)

    added = [
        register(Signal(PER_LAYER, "probe, per layer", KINDS, per_layer)),
        register(Signal(WHOLE, "probe, whole model", ("cross",), whole_model)),
        register(Signal(SLOW, "probe, slow", ("cross",), slow, cost="passes")),
    ]
    try:
        yield calls
    finally:
        for signal in added:
            SIGNALS.pop(signal.name, None)
