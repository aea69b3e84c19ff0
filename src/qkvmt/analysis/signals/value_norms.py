"""Value-weighted attention, ‖α·W_O v‖ (Kobayashi et al. 2020; qkvmt.analysis.value_norms): per
head, and per layer as the norm of the heads' summed vectors."""

from qkvmt.analysis.signals import Context, Signal, SignalMaps, register, stacked
from qkvmt.analysis.trace import KINDS
from qkvmt.analysis.value_norms import value_norms


def norms(context: Context) -> dict[str, SignalMaps]:
    out = {}
    for kind in KINDS:
        pairs = [
            value_norms(site.weights, values)
            for site, values in zip(context.traced.layers[kind], context.transformed_values[kind])
        ]
        out[kind] = SignalMaps(stacked([head for head, _ in pairs]), stacked([layer for _, layer in pairs]))
    return out


register(Signal("value_norms", "value-weighted, ‖α·W_O v‖", KINDS, norms))
