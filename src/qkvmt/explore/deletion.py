"""The explorer's deletion curves: for one target token of a sentence, each signal's curve (the
drop of the token's log p as the source tokens it ranks highest are deleted) beside random
orders, by qkvmt.studies.faithfulness.curves.deletion_curves, as the JSON the page draws.

A request (POST /api/curves) is {"source": text, "row": the target token's position}.
"""

from qkvmt.analysis.forced import pair_ids
from qkvmt.analysis.signals import SIGNALS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.results.html import plain
from qkvmt.studies.faithfulness.curves import Reading, deletion_curves

DRAWS = 10  # random deletion orders whose mean is a curve's baseline


def row_of(body: dict) -> int:
    """The request's row, checked to be a whole number before anything is computed (its range
    is the translation's, checked in `answer`)."""
    row = body.get("row")
    if isinstance(row, bool) or not isinstance(row, int):
        raise UserError(f"row={row!r}: give a whole number, the target token's position")
    return row


def answer(model: Model, sentence, row: int) -> dict:
    """Each signal's deletion curve for target row `row` of `sentence` (session.Sentence; the row
    predicts out_tokens[row]): {row, token, fractions, ks, readings: [{signal, label, layer,
    drops}], random}; computed on request (a batched forced pass per row, and every signal again
    on the cut pair), and kept with the sentence."""
    tokens = sentence.attention.out_tokens
    if not 0 <= row < len(tokens):
        raise UserError(f"row={row}: the translation has {len(tokens)} target tokens (rows 0..{len(tokens) - 1})")
    if row not in sentence.curves:
        src, tgt = pair_ids(model.tokenizer, sentence.attention.source, sentence.ids)
        c = deletion_curves(model.transformer, src, tgt, row=row, draws=DRAWS)
        sentence.curves[row] = plain(
            {
                "row": row,
                "token": tokens[row],
                "fractions": c["fractions"],
                "ks": c["ks"],
                "readings": readings(c["curves"]),
                "random": c["random"],
            }
        )
    return sentence.curves.latest(row)


def readings(curves: dict[str, list]) -> list[dict]:
    """deletion_curves' {reading label: drops} as [{signal, label, layer, drops}], labelled as the
    registry labels the signals, in registry and layer order."""
    out = []
    for name, signal in SIGNALS.items():
        whole = Reading(name, None).label
        if whole in curves:
            out.append({"signal": name, "label": signal.label, "layer": None, "drops": curves[whole]})
        layer = 0
        while Reading(name, layer).label in curves:
            out.append(
                {
                    "signal": name,
                    "label": f"{signal.label}, layer {layer}",
                    "layer": layer,
                    "drops": curves[Reading(name, layer).label],
                }
            )
            layer += 1
    return out
