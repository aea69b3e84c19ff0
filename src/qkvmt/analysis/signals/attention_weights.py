"""The attention weights α themselves: each head's, and each layer's as the heads' average."""

from qkvmt.analysis.signals import Context, Signal, SignalMaps, register, stacked
from qkvmt.analysis.trace import KINDS
from qkvmt.text.sinks import SINKS


def weights(context: Context) -> dict[str, SignalMaps]:
    out = {}
    for kind in KINDS:
        heads = stacked([site.weights for site in context.traced.layers[kind]])  # (L, H, rows, cols)
        out[kind] = SignalMaps(heads, heads.mean(axis=1))
    return out


# </s> and punctuation take much of a trained model's cross-attention weight.
register(Signal("weights", "attention weights", KINDS, weights, sinks=SINKS))
