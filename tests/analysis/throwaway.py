"""Signals registered for one test and removed after it: whatever lists signals (the forced pass,
the views, the policy, the leaderboard, the explorer) must show them with no edit of its own.
Their maps are known answers, made from the weights' own."""

from contextlib import contextmanager

from qkvmt.analysis.signals import SIGNALS, Signal, SignalMaps, register
from qkvmt.analysis.trace import KINDS

PER_LAYER, WHOLE, SLOW, SIGNED = "probe_layers", "probe_whole", "probe_slow", "probe_signed"


def per_layer(context) -> dict[str, SignalMaps]:
    """Every kind, one map per layer and none per head: twice the weights' layer maps."""
    return {kind: SignalMaps(None, 2 * maps.layers) for kind, maps in SIGNALS["weights"](context).items()}


def whole_model(context) -> dict[str, SignalMaps]:
    """Cross-attention only, one map of the whole model: the last layer's average weights."""
    return {"cross": SignalMaps(None, SIGNALS["weights"](context)["cross"].layers[-1:])}


def signed(context) -> dict[str, SignalMaps]:
    """Cross-attention only, a map with negative values (not shares): the weights less their row's mean."""
    maps = SIGNALS["weights"](context)["cross"]
    return {"cross": SignalMaps(None, maps.layers - maps.layers.mean(-1, keepdims=True))}


@contextmanager
def registered(*signals: Signal):
    """`signals` registered for the block, unregistered however it ends."""
    added = [register(signal) for signal in signals]
    try:
        yield
    finally:
        for signal in added:
            SIGNALS.pop(signal.name, None)


def signed_signal():
    """Registers probe_signed for the block: a map of signed numbers, as a signal of differences has."""
    return registered(Signal(SIGNED, "probe, signed", ("cross",), signed))


@contextmanager
def throwaway_signals():
    """Registers probe_layers, probe_whole and probe_slow (cost "passes": computed only when
    named; it counts its calls in `calls`), and unregisters them however the block ends."""
    calls = []

    def slow(context):
        calls.append(context)
        return whole_model(context)

    with registered(
        Signal(PER_LAYER, "probe, per layer", KINDS, per_layer),
        Signal(WHOLE, "probe, whole model", ("cross",), whole_model),
        Signal(SLOW, "probe, slow", ("cross",), slow, cost="passes"),
    ):
        yield calls
