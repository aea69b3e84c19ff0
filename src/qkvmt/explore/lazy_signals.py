"""The explorer's signals computed when chosen: a sentence's first view computes only what it draws
(`FIRST`: the attention weights, and ALTI+, whose source shares colour the tokens); any other signal
is computed the first time the page's signal selector or a policy asks for it, and kept with the
sentence. Integrated gradients took 20 s for an 18-word sentence at OPUS-MT-base's size on two
cores (docs/results.md), which no first view should wait for.

A request (POST /api/signal) is {"source": text, "signal": a registered signal's name} and, for the
reference's teacher-forced pass rather than the model's translation, "reference": text; its answer
is that signal's maps of each kind it covers, {kind: {label, maps, layers[, without]}}, as `viewed`
gives them.
"""

from qkvmt.analysis.forced import ForcedPass, forced_attention
from qkvmt.analysis.signals import SIGNALS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.results.html import plain, viewer_maps
from qkvmt.text.sinks import SINKS

FIRST = ("weights", "alti")


def listed() -> dict[str, dict[str, str]]:
    """{kind: {signal: label}}: every registered signal of each kind, in the registry's order, as the
    page's signal selector lists them (those a sentence has no maps of yet marked to compute)."""
    out: dict[str, dict[str, str]] = {}
    for name, signal in SIGNALS.items():
        for kind in signal.kinds:
            out.setdefault(kind, {})[name] = signal.label
    return out


def viewed(attention: ForcedPass, names) -> dict:
    """What the page's viewer draws of a pass: the weights and the signals `names` of every kind,
    each cross map also without its sinks (`SINKS`, the rows renormalized), so the page's switch
    between the two asks the server nothing."""
    return viewer_maps(attention.maps(), {n: attention.maps(n) for n in names if n != "weights"}, drop=SINKS)


def ensure(model: Model, attention: ForcedPass, target: str | list[int], name: str) -> ForcedPass:
    """The forced pass `attention` of (its source, `target`) with signal `name` computed too (from
    a trace of the same pair, its full-context reading included), if it has not been."""
    if name not in SIGNALS:
        raise UserError(f"signal={name!r}: use one of {', '.join(SIGNALS)}")
    if name in attention.signals:
        return attention
    context = attention.full_context_layer
    more = forced_attention(model.transformer, model.tokenizer, attention.source, target, context, {name})
    return attention.adding(more)


def name_of(body: dict) -> str:
    name = body.get("signal")
    if not isinstance(name, str):
        raise UserError(f"signal={name!r}: give a signal's name, one of {', '.join(SIGNALS)}")
    return name


def answer(attention: ForcedPass, name: str) -> dict:
    """Signal `name`'s maps of each kind it covers, of a pass that holds them (`ensure`)."""
    every = viewed(attention, [name])
    return plain({kind: maps["signals"][name] for kind, maps in every.items() if name in maps.get("signals", {})})
