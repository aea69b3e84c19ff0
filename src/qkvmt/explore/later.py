"""The explorer's signals computed when chosen: a sentence's first view computes only what it draws
(`FIRST`: the attention weights, and ALTI+, whose source shares colour the tokens); any other signal
is computed the first time the page's signal selector or a policy asks for it, and kept with the
sentence. Integrated gradients took 20 s for an 18-word sentence at OPUS-MT-base's size on two
cores (docs/results.md), which no first view should wait for.

A request (POST /api/signal) is {"source": text, "signal": a registered signal's name}; its answer is
that signal's maps of each kind it covers, {kind: {label, maps, layers}}, as `viewer_maps` gives them.
"""

from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.signals import SIGNALS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.views.html import plain, viewer_maps

FIRST = ("weights", "alti")


def listed() -> dict[str, dict[str, str]]:
    """{kind: {signal: label}}: every registered signal of each kind, in the registry's order, as the
    page's signal selector lists them (those a sentence has no maps of yet marked to compute)."""
    out: dict[str, dict[str, str]] = {}
    for name, signal in SIGNALS.items():
        for kind in signal.kinds:
            out.setdefault(kind, {})[name] = signal.label
    return out


def ensure(model: Model, sentence, name: str) -> None:
    """The sentence's forced pass with signal `name` computed too (from a trace of the same pair, the
    full-context reading included), if it has not been."""
    if name not in SIGNALS:
        raise UserError(f"signal={name!r}: use one of {', '.join(SIGNALS)}")
    if name not in sentence.attention.signals:
        source, layer = sentence.attention.source, model.meta.full_context_layer
        more = forced_attention(model.transformer, model.tokenizer, source, sentence.ids, layer, {name})
        sentence.attention = sentence.attention.adding(more)


def answer(model: Model, sentence, body: dict) -> dict:
    name = body.get("signal")
    if not isinstance(name, str):
        raise UserError(f"signal={name!r}: give a signal's name, one of {', '.join(SIGNALS)}")
    ensure(model, sentence, name)
    a = sentence.attention
    every = viewer_maps(a.maps(), {name: a.maps(name)})
    return plain({kind: maps["signals"][name] for kind, maps in every.items() if name in maps.get("signals", {})})
