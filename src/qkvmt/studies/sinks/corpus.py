"""Where cross-attention's mass goes on a corpus (`Model.sinks`, `qkvmt sinks`): each layer's and
head's mean share of weight on `</s>` and on punctuation (qkvmt.text.sinks), read two ways: forced
on the references (teacher forcing) and over the model's own translations. A map read without
setting that mass aside misleads, and the two readings need not agree: a reference is not what
the model would have written.

Self-attention's mass is measured beside it: each encoder and decoder self-attention head's share
on the query's own position. A model that cannot learn its comparison (no W_Q and no W_K) is
expected to look at itself there: no vector of the same length has a larger dot product with it.

Every target row counts once, as the heads' profiles count (qkvmt.studies.heads.masking): a share is the
weight a head puts on those columns, summed over every row of every sentence, over the rows."""

import sys
import time

import numpy as np
from tqdm import tqdm

from qkvmt.analysis.forced import forced_attention
from qkvmt.host.machine import recorded_with
from qkvmt.studies.checks import paired
from qkvmt.studies.model_protocol import ModelLike, identity
from qkvmt.studies.sinks.result import OWN, PARTS, READINGS, SELF_KINDS, SinkMass
from qkvmt.text.sinks import PUNCTUATION, mass_on, sink_columns
from qkvmt.text.tokenizer import EOS


def shares(model: ModelLike, pairs: list[tuple[str, str | list[int]]], reading: str) -> tuple[dict, int, dict]:
    """({part: (L, H) mean share of a row's weight on its columns}, rows, {kind: (L, H) mean share of
    a self-attention row's weight on its own position}) over one forced pass per pair (a target
    text, or the ids decoding generated), weights only."""
    mass, rows = dict.fromkeys(PARTS, 0.0), 0
    diagonal, square_rows = dict.fromkeys(SELF_KINDS, 0.0), dict.fromkeys(SELF_KINDS, 0)
    for source, target in tqdm(pairs, desc=f"{reading} passes", unit="sent", file=sys.stderr, dynamic_ncols=True):
        forced = forced_attention(model.transformer, model.tokenizer, source, target, analyses={"weights"})
        cross = forced.map("cross")
        weights = cross.weights.astype(np.float64)  # (L, H, T, S): summed over a thousand sentences
        eos, punctuation = sink_columns(cross.cols, EOS), sink_columns(cross.cols, PUNCTUATION)
        for part, columns in zip(PARTS, (eos, punctuation, eos | punctuation)):  # both: </s> and punctuation
            mass[part] = mass[part] + mass_on(weights, columns)  # (L, H)
        rows += len(cross.rows)
        for kind in SELF_KINDS:  # query i sits at key position i: the diagonal
            square = forced.map(kind).weights.astype(np.float64)  # (L, H, T, T)
            diagonal[kind] = diagonal[kind] + np.einsum("lhii->lh", square)
            square_rows[kind] += square.shape[-1]
    return {part: m / rows for part, m in mass.items()}, rows, {k: diagonal[k] / square_rows[k] for k in SELF_KINDS}


def by_layer(found: dict, parts=PARTS) -> list[dict]:
    """{part: (L, H)} as one entry a layer: each part's head average, and each head's shares."""
    n_layers, n_heads = found[parts[0]].shape
    return [
        {
            "layer": layer,
            **{part: float(found[part][layer].mean()) for part in parts},
            "heads": [{"head": h, **{part: float(found[part][layer, h]) for part in parts}} for h in range(n_heads)],
        }
        for layer in range(n_layers)
    ]


def sinks(
    model: ModelLike, sources: list[str], references: list[str], n: int = 1000, name: str = "sentences", **decode
) -> SinkMass:
    """The first n pairs of `sources` and `references` (named `name`) that have both: each cross
    head's share on the sinks forced on the references and over the model's own translations
    (its checkpoint's decoding, with DecodeConfig keywords over it), and each self-attention
    head's share on the query's own position in the same passes."""
    start = time.time()
    pairs = paired(sources, references, n)
    own = model.translate([s for s, _ in pairs], progress=True, **decode)
    seconds = {"translate": round(time.time() - start, 1)}
    readings, rows, itself = {}, {}, {}
    for reading, targets in zip(READINGS, ([r for _, r in pairs], own.ids)):
        began = time.time()
        found, rows[reading], diagonal = shares(model, [(s, t) for (s, _), t in zip(pairs, targets)], reading)
        readings[reading] = by_layer(found)
        itself[reading] = {kind: by_layer({OWN: diagonal[kind]}, (OWN,)) for kind in SELF_KINDS}
        seconds[f"{reading} passes"] = round(time.time() - began, 1)
    result = {
        **identity(model),
        "split": name,
        "study": "sinks",
        "n": len(pairs),
        "decode": own.settings,
        "rows": rows,
        "readings": readings,
        "self": itself,
        **recorded_with(),
        "seconds": seconds,
        "wall_s": round(time.time() - start, 1),
    }
    return SinkMass(result)
