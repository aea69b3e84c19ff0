"""The explorer's "what if" panel: a request to edit one sentence's attention, checked field by
field, applied by `Model.intervene` with the explorer's decoding settings, and its result as the
JSON the page draws.

A request (POST /api/intervene, anything a browser or an attacker can send) is

    {"source": text, "edit": "swap" | "zero", "what": a part the edit takes, "kind": a kind of
     attention it takes, "layer": a layer or null (every layer), "head": a head or null (every
     head; zero needs one), "a": ..., "b": ... (swap only: two distinct source token positions)}

Its fields are read and checked as `qkvmt intervene edits=[...]` reads its own: one parser.

The edit names, their parts and kinds are `choices()`, which the page reads: it lists none itself.
"""

from qkvmt.analysis.edits import PARTS, SOURCE_KINDS, Swap, Zero
from qkvmt.analysis.edits import edit_of as parsed
from qkvmt.analysis.trace import KINDS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.results.html import plain
from qkvmt.results.intervention import describe

# What the panel offers of qkvmt.analysis.edits, and which of the request's fields the page fills
# in for each: Swap in the attentions whose keys are the source tokens (those it accepts), of two
# picked tokens in every head; Zero of one head's output (zeroing its values silences it alike).
EDITS = {
    "swap": (Swap, {"what": PARTS, "kind": SOURCE_KINDS, "takes": ("a", "b")}),
    "zero": (Zero, {"what": ("output",), "kind": KINDS, "takes": ("head",)}),
}
FIELDS = ("source", "edit", "what", "kind", "layer", "head", "a", "b")
KEPT = 64  # answers kept per sentence, oldest dropped first: a click back recomputes nothing, memory stays bounded

PANEL = (
    "<h2>What if</h2><p>Click two source tokens and swap their keys, their values or both in the kind of "
    "attention the maps above show, or zero the head chosen there; the sentence is translated again with "
    'the edit at every step. Marked: the words the edit changed.</p><div id="what-if">'
    '<p id="what-if-tokens" class="tokens"></p><p><span id="what-if-picked"></span> '
    '<button type="button" id="what-if-clear">clear</button></p><div id="what-if-controls" class="controls"></div>'
    '<p id="what-if-scope" class="status"></p><p id="what-if-error" class="error" role="alert" hidden></p>'
    '<dl id="what-if-result" class="texts" hidden></dl></div>'
)


def choices() -> dict:
    """The page's buttons: {edit name: {"what": its parts, "kind": its kinds of attention, "takes":
    the fields the page fills in besides layer: the picked tokens, or the head chosen}}."""
    return {name: {k: list(v) for k, v in taken.items()} for name, (_, taken) in EDITS.items()}


def _named(name: str, value, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise UserError(f"{name}={value!r}: use one of {', '.join(allowed)}")
    return value


def edit_of(body: dict):
    """The Swap or Zero a request asks for, read by the edits' own parser (edits.edit_of), which
    checks each field's type; its positions, layer and head are checked against the model and
    the sentence as Model.intervene compiles it, as for every other surface."""
    unknown = [k for k in body if k not in FIELDS]
    if unknown:
        raise UserError(f"unknown field {unknown[0]!r}: a what-if request has {', '.join(FIELDS)}")
    name = _named("edit", body.get("edit"), EDITS)
    taken = EDITS[name][1]
    scope = {
        "what": _named("what", body.get("what"), taken["what"]),
        "kind": _named("kind", body.get("kind"), taken["kind"]),
        "layers": body.get("layer"),
        "heads": body.get("head"),
    }
    if name == "zero":
        given = [k for k in ("a", "b") if body.get(k) is not None]
        if given:
            raise UserError(f"{given[0]}: zero edits a head, not source tokens; leave a and b out")
        if scope["heads"] is None:
            raise UserError("zero needs a head: pick one (head=0 is the first)")
        return parsed({name: scope}, "request")
    if body.get("a") is None or body.get("b") is None:
        raise UserError("swap needs two source tokens, a and b: pick two")
    return parsed({name: scope | {"a": body["a"], "b": body["b"]}}, "request")


def answer(model: Model, sentence, body: dict, decode: dict) -> dict:
    """The edit `body` asks of `sentence` (session.Sentence: a source and its forced pass), by
    `Model.intervene(source, edit, **decode)` given the sentence's translation (not searched
    again), as the page draws it: both translations, which words of the edited one changed, each
    original token's log-probability with and without the edit, and their total change. Kept per
    sentence and edit (KEPT): asked again, nothing is recomputed."""
    edit = edit_of(body)
    if edit not in sentence.edits:  # sentence.edits keeps the KEPT latest
        r = model.intervene(sentence.attention.source, edit, original=sentence.ids, **decode)
        sentence.edits[edit] = plain(
            {
                "source": r.source,
                "edit": describe(edit),
                "src_tokens": r.src_tokens,
                "original": r.original,
                "edited": r.edited,
                "edited_words": r.edited.split(),  # the words `changed` marks
                "changed": r.changed,
                "changed_words": [w for w, c in zip(r.edited.split(), r.changed) if c],
                "original_tokens": r.original_tokens,
                "log_prob": r.log_prob,
                "log_prob_edited": r.log_prob_edited,
                "log_prob_total": r.log_prob.sum(),
                "log_prob_edited_total": r.log_prob_edited.sum(),
                "log_prob_change": r.log_prob_change.sum(),
            }
        )
    return sentence.edits.latest(edit)
