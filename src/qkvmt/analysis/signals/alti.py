"""ALTI+ (Ferrando et al. 2022; qkvmt.analysis.alti): how much each source token contributed to
each prediction through the whole model up to each decoder layer; per head, each cross-attention
head's own share against the same output."""

from qkvmt.analysis.signals import Context, Signal, SignalMaps, register


def alti(context: Context) -> dict[str, SignalMaps]:
    c = context.contributions
    return {"cross": SignalMaps(c.source_heads, c.source)}


register(Signal("alti", "ALTI+ source contributions", ("cross",), alti))
