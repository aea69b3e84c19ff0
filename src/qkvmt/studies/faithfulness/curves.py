"""Faithfulness of a signal: change the model as the signal says and measure what its prediction
loses (deletion and sufficiency, DeYoung et al. 2020; the area over the perturbation curve, AOPC,
Samek et al. 2017).

A *reading* is one signal's cross-attention map at one decoder layer, the layer as a whole
(`SignalMaps.layers[l]`), or a whole-model signal's one map. For target row t of a forced pass
(it predicts tgt_out[t]) the reading ranks the source tokens x_1 .. x_n by its row t, most
important first (ties in source order); `</s>` is never ranked and never deleted. A signal that
names its sinks (qkvmt.analysis.signals.Signal.sinks: the weights, `</s>` and punctuation) is also
read without them, each row renormalized over the other columns: that reading ranks the same
tokens in the same order, its punctuation last. Then:

* deletion: the k = ceil(f·n) top-ranked tokens are deleted for each level f (0.1 .. 0.5 by
  default), and the drop of log p(tgt_out[t]) is recorded; the mean over the levels is the
  AOPC: the higher, the more the reading found what the prediction used. The same for the
  reading reversed (least important first) and for random orders, the baselines.
* sufficiency: only the top k are kept; the mean drop over the levels: the lower, the more the
  top k alone carry the prediction.

Deleting a token replaces its id by `<pad>`: the model masks pad keys in the encoder's
self-attention and in every cross-attention (`Transformer.source_mask`), so no other position
reads it, while the other tokens keep their ids and positions (nothing shifts left). A pad
position's own encoder row is still computed, but nothing attends to it.

Every edited source of one sentence is a row of one batched forced pass (fp32, no gradients),
the unedited source among them, so a drop compares two rows of the same pass; the decoder runs
only up to the last scored row, and each distinct source runs once whatever asks for it.
"""

import math
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from qkvmt.analysis.signals import SIGNALS, Context, cross_signals
from qkvmt.analysis.trace import trace
from qkvmt.model.inputs import Inputs, build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.text.significance import interval
from qkvmt.text.sinks import renormalized_in_place, sink_columns

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5)
TESTS = ("deletion", "reversed", "sufficiency")


@dataclass(frozen=True)
class Reading:
    signal: str
    layer: int | None  # None: the one map of a whole-model signal
    drop: tuple[str, ...] = ()  # the columns left out, each row renormalized (qkvmt.text.sinks)

    @property
    def label(self) -> str:
        name = self.signal if self.layer is None else f"{self.signal} layer {self.layer}"
        return name + (f" without {' and '.join(self.drop)}" if self.drop else "")


def forced_inputs(model: Transformer, src: list[int], tgt: list[int]) -> Inputs:
    """One pair's tensors (no special tokens in the ids), on the model's device."""
    x = build_inputs([src], [tgt], model.cfg.specials)
    device = next(model.parameters()).device
    return Inputs(x.src.to(device), x.tgt_in.to(device), x.tgt_out.to(device))


@torch.no_grad()  # a gradient signal enables gradients for its own passes
def readings(
    model: Transformer,
    x: Inputs,
    signals: list[str],
    rows: list[int] | None = None,
    seconds: Counter | None = None,
    tokens: list[str] | None = None,
) -> dict[Reading, np.ndarray]:
    """Every reading of the signals for one traced pair: reading -> (target rows, source columns).
    rows: the target rows that will be read (a gradient signal computes only these; None: all).
    seconds: adds the time the trace and each signal took (a signal's share of what the context
    caches is the first asker's). tokens: the source's tokens; with them, each signal that names
    sinks is also read without them (its columns there 0, each row renormalized)."""
    seconds = Counter() if seconds is None else seconds
    start = time.perf_counter()
    context = Context(model, trace(model, x.src, x.tgt_in), x.tgt_out, rows)
    seconds["trace"] += time.perf_counter() - start
    out = {}
    for name in signals:
        start = time.perf_counter()
        maps = SIGNALS[name](context)["cross"]
        seconds[name] += time.perf_counter() - start
        layers = {None: maps.layers[0]} if maps.whole_model else dict(enumerate(maps.layers))
        out |= {Reading(name, layer): m for layer, m in layers.items()}
        sinks = SIGNALS[name].sinks
        if tokens is not None and sinks:
            columns = sink_columns(tokens, sinks)
            out |= {Reading(name, layer, sinks): renormalized_in_place(m, columns) for layer, m in layers.items()}
    return out


def cuts(n: int, fractions) -> list[int]:
    """k = ceil(f·n) per level; rounded first, so 0.3 × 10 deletes 3, not 4."""
    return [math.ceil(round(f * n, 9)) for f in fractions]


def ranking(row: np.ndarray) -> np.ndarray:
    """Source positions, most important first; ties keep source order."""
    return np.argsort(-np.asarray(row, dtype=np.float64), kind="stable")


class Variants:
    """The distinct edited sources of one sentence, each a mask of the n tokens it keeps (</s>
    is always kept); variant 0 keeps all of them."""

    def __init__(self, n: int):
        self.n, self.masks, self.index = n, [], {}
        self.keeping(np.arange(n))

    def _add(self, kept: np.ndarray) -> int:
        key = kept.tobytes()
        if key not in self.index:
            self.index[key] = len(self.masks)
            self.masks.append(kept)
        return self.index[key]

    def deleting(self, positions) -> int:
        kept = np.ones(self.n, dtype=bool)
        kept[np.asarray(positions, dtype=np.int64)] = False
        return self._add(kept)

    def keeping(self, positions) -> int:
        kept = np.zeros(self.n, dtype=bool)
        kept[np.asarray(positions, dtype=np.int64)] = True
        return self._add(kept)

    def sources(self, src: Tensor, pad_id: int) -> Tensor:
        """(V, S) ids: src (1, S) once per variant, with pad where a variant deletes a token."""
        out = src.repeat(len(self.masks), 1)
        deleted = torch.from_numpy(~np.stack(self.masks)).to(src.device)  # (V, n)
        out[:, : self.n] = out[:, : self.n].masked_fill(deleted, pad_id)
        return out


@torch.no_grad()
def log_probs(model: Transformer, src: Tensor, x: Inputs, rows: list[int]) -> Tensor:
    """log p(tgt_out[t]) at each of `rows` for every source row of src (V, S): (V, len(rows)),
    in one batched forced pass that decodes only up to the last of the rows."""
    v, last = src.size(0), max(rows) + 1
    memory, src_mask, _ = model.encode(src)
    states, _, _ = model.decode(x.tgt_in[:, :last].expand(v, -1), memory, src_mask, project=False)  # (V, last, D)
    logits = model.output(states[:, rows]).float()  # (V, R, vocab): only the scored rows are projected
    targets = x.tgt_out[0, rows].expand(v, -1)[..., None]  # (V, R, 1)
    return logits.log_softmax(-1).gather(-1, targets)[..., 0]


EDITS = {  # test -> how a variant edits the source, from a ranking and a level's k
    "deletion": lambda variants, order, k: variants.deleting(order[:k]),
    "reversed": lambda variants, order, k: variants.deleting(order[::-1][:k]),
    "sufficiency": lambda variants, order, k: variants.keeping(order[:k]),
}


@dataclass
class SentenceScores:
    """The drops of log p (nats) of one sentence: drops[test][reading] (rows, levels), random
    (rows, draws, levels); rows are the target rows scored, ks the tokens each level deletes."""

    rows: list[int]
    ks: list[int]
    drops: dict[str, dict[Reading, np.ndarray]]
    random: np.ndarray


def score(
    model: Transformer,
    x: Inputs,
    maps: dict[Reading, np.ndarray],
    rows: list[int],
    fractions,
    random_orders: np.ndarray,
    tests=TESTS,
) -> SentenceScores:
    """Each of `tests` for every reading at each target row, and deletion in each of
    random_orders (draws, n), all from one batched pass. The n source tokens are the columns
    before </s>; rows index tgt_out."""
    n = x.src.size(1) - 1
    ks = cuts(n, fractions)
    variants = Variants(n)
    ids = {test: {} for test in tests}  # test -> reading -> (rows, levels) variant ids
    for reading, m in maps.items():
        orders = [ranking(m[t, :n]) for t in rows]
        for test in tests:
            ids[test][reading] = np.array([[EDITS[test](variants, order, k) for k in ks] for order in orders])
    random_ids = np.array(
        [[variants.deleting(order[:k]) for k in ks] for order in random_orders], dtype=np.int64
    ).reshape(-1, len(ks))  # (draws, levels)
    lp = log_probs(model, variants.sources(x.src, model.cfg.pad_id), x, rows).cpu().numpy()  # (V, R)
    drops = lp[0] - lp  # (V, R): what each variant lost at each row
    r = np.arange(len(rows))
    by_test = {test: {reading: drops[v, r[:, None]] for reading, v in per.items()} for test, per in ids.items()}
    return SentenceScores(rows, ks, by_test, drops[random_ids[None], r[:, None, None]])


def deletion_curves(
    model: Transformer,
    src: list[int],
    tgt: list[int],
    row: int,
    signals: list[str] | None = None,
    fractions=FRACTIONS,
    draws: int = 0,
    seed: int = 0,
) -> dict:
    """Each reading's deletion curve for one target token: for the pair's subword ids src and tgt
    (no special tokens) and target row `row` (it predicts tgt_out[row]; row len(tgt) predicts
    </s>), {"fractions", "ks": tokens deleted per level, "curves": {reading label: [drop of
    log p per level]}, "random": the mean curve of `draws` seeded random orders, or None};
    signals default to every signal with cross-attention maps."""
    if not src or not 0 <= row <= len(tgt):
        raise ValueError(f"row {row} of a target of {len(tgt)} subwords (0..{len(tgt)}), and a non-empty source")
    x = forced_inputs(model, src, tgt[: row + 1])  # the causal decoder's row reads no later target token
    maps = readings(model, x, cross_signals() if signals is None else signals, rows=[row])
    rng = np.random.default_rng(seed)
    orders = np.array([rng.permutation(len(src)) for _ in range(draws)], dtype=np.int64).reshape(draws, len(src))
    s = score(model, x, maps, [row], fractions, orders, tests=("deletion",))
    return {
        "fractions": list(fractions),
        "ks": s.ks,
        "curves": {reading.label: s.drops["deletion"][reading][0].tolist() for reading in maps},
        "random": s.random[0].mean(0).tolist() if draws else None,
    }


def summarize(sentences: list[SentenceScores]) -> dict:
    """Per reading the deletion AOPC, the reversed AOPC and the mean sufficiency drop, and the
    random AOPC: each a sentence's mean over its rows (and draws) and levels first, then the
    mean and 95% interval over sentences, so a long sentence counts once like a short one."""

    def over(get) -> dict:
        return interval([get(s).mean() for s in sentences])

    keys = {"deletion": "deletion_aopc", "reversed": "reversed_aopc", "sufficiency": "sufficiency"}
    rows = [
        {
            "signal": r.signal,
            "layer": r.layer,
            "drop": list(r.drop),
            "label": r.label,
            **{key: over(lambda s, r=r, test=test: s.drops[test][r]) for test, key in keys.items()},
        }
        for r in sentences[0].drops["deletion"]
    ]
    return {"readings": rows, "random_aopc": over(lambda s: s.random)}
