"""Every signal's cross-attention readings scored on a corpus by deleting, and keeping only, the
source tokens each ranks highest for a target token (qkvmt.studies.faithfulness.curves), with the AER
of an align leaderboard beside them: `Model.faithfulness`, `qkvmt faithfulness`. The pass is
forced on the references (teacher forcing) or on the model's own translations (`target`)."""

import sys
import time
from collections import Counter

import numpy as np
from tqdm import tqdm

from qkvmt.analysis.forced import token_names
from qkvmt.errors import UserError
from qkvmt.host.machine import recorded_with
from qkvmt.model.inputs import fits
from qkvmt.studies.checks import checked_faithfulness, checked_target, read_leaderboard
from qkvmt.studies.faithfulness.curves import forced_inputs, readings, score, summarize
from qkvmt.studies.faithfulness.result import INTERVAL, Faithfulness
from qkvmt.studies.model_protocol import ModelLike, identity
from qkvmt.text.tokenizer import encode

BASELINE = (
    "a deleted source token's id becomes <pad>: the encoder and every cross-attention mask it as a key, "
    "the other tokens keep their ids and positions, and </s> is never deleted"
)


def aer_of(board: list[dict], reading: dict) -> dict | None:
    """A reading's AER: the layer as a whole (head "mean") without the same columns, at the rows
    and direction that align ranked best for it (its leaderboard is best first); a whole-model
    signal's, any layer. A leaderboard from before `drop` has only readings of every column."""
    signal, layer, drop = reading["signal"], reading["layer"], reading["drop"]
    for row in board:
        same = row.get("signal") == signal and row.get("head") == "mean" and (row.get("drop") or []) == drop
        if same and (layer is None or row.get("layer") == layer):
            return {k: row[k] for k in ("aer", "layer", "head", "rows", "direction", "drop") if k in row}
    return None


def pairs_of(tokenizer, src: list[str], targets: list, n: int, max_positions: int) -> tuple[list, dict]:
    """The first n pairs of subword ids with a source and a target (a reference's text, or the
    ids decoding generated) that fit the model's positions, and how many were passed over, and why."""
    skipped, out = {"empty": 0, "too_long": 0}, []
    for s, r in zip(src, targets):
        if len(out) == n:
            break
        if not (s.strip() and (r if isinstance(r, list) else r.strip())):
            skipped["empty"] += 1
            continue
        ids = encode(tokenizer, [s]) + [r] if isinstance(r, list) else encode(tokenizer, [s, r])
        if not all(fits(len(i), max_positions) for i in ids):
            skipped["too_long"] += 1
            continue
        out.append(ids)
    return out, skipped


def own_pairs(model: ModelLike, sources: list[str], n: int) -> tuple[list, dict, dict]:
    """pairs_of for the model's own translations, forced as decoding generated them (its ids),
    decoding n sources at a time only until n pairs are found; and the decoding settings."""
    ids, settings = [], {}
    while True:
        more = model.translate(sources[len(ids) : len(ids) + n], progress=True)
        ids, settings = ids + more.ids, more.settings
        pairs, skipped = pairs_of(model.tokenizer, sources, ids, n, model.transformer.cfg.max_positions)
        if len(pairs) == n or len(ids) == len(sources):
            return pairs, skipped, settings


def forced_pairs(model: ModelLike, sources: list[str], references: list[str], target: str, n: int, name: str):
    """(pairs, skipped, decoding settings or None) of what the pass is forced on: the references,
    or the model's own translations."""
    checked_target(target)
    if target == "reference" and not any(r.strip() for r in references):
        raise UserError(
            f"{name} has no references: target=reference forces the reference translation; give a split "
            "or src_file/ref_file with translations, or target=own to force the model's own"
        )
    positions = model.transformer.cfg.max_positions
    if target == "own":
        pairs, skipped, decoding = own_pairs(model, sources, n)
    else:
        (pairs, skipped), decoding = pairs_of(model.tokenizer, sources, references, n, positions), None
    if not pairs:
        raise UserError(
            f"{name}: no pair has a source and a {target} target that fit the model's {positions} positions"
        )
    return pairs, skipped, decoding


def scored_sentences(
    model: ModelLike, pairs: list, names: list[str], levels: list[float], draws: dict
) -> tuple[list, Counter]:
    """Each pair's readings scored at its randomly drawn target tokens (`draws`: seed,
    targets_per_sentence, random_draws), and the seconds spent, by what they were spent on."""
    t, sentences, seconds = model.transformer, [], Counter()
    for i, (s, r) in enumerate(tqdm(pairs, desc="faithfulness", unit="sentence", file=sys.stderr, dynamic_ncols=True)):
        rng = np.random.default_rng([draws["seed"], i])  # a sentence's draws do not depend on the others
        rows = sorted(rng.choice(len(r), size=min(draws["targets_per_sentence"], len(r)), replace=False).tolist())
        orders = np.stack([rng.permutation(len(s)) for _ in range(draws["random_draws"])])
        x = forced_inputs(t, s, r[: rows[-1] + 1])  # the causal decoder's rows read no later target token: stop there
        maps = readings(t, x, names, rows, seconds, token_names(model.tokenizer, x.src[0]))
        begin = time.perf_counter()
        sentences.append(score(t, x, maps, rows, levels, orders))
        seconds["edited passes"] += time.perf_counter() - begin
    return sentences, seconds


def faithfulness(
    model: ModelLike,
    sources: list[str],
    references: list[str],
    name: str = "sentences",
    n: int = 500,
    signals: list[str] | None = None,
    levels=(0.1, 0.2, 0.3, 0.4, 0.5),
    draws: dict | None = None,
    aer_file=None,
    target: str = "reference",
) -> Faithfulness:
    """The first n usable pairs of `sources` and `references` (named `name`), each signal's
    readings scored at `levels`; `draws`: seed, targets_per_sentence, random_draws; `aer_file`:
    an aer.json with a leaderboard, whose AER each reading shows; `target`: what the pass is
    forced on, the references or the model's own translations ("own")."""
    start = time.time()
    draws = {"targets_per_sentence": 3, "random_draws": 3, "seed": 0} | (draws or {})
    counts = {"n": n} | {k: draws[k] for k in ("targets_per_sentence", "random_draws")}
    names, levels = checked_faithfulness(signals, levels, counts, draws["seed"])
    board = read_leaderboard(aer_file)
    pairs, skipped, decoding = forced_pairs(model, sources, references, target, n, name)
    sentences, seconds = scored_sentences(model, pairs, names, levels, draws)
    summary = summarize(sentences)
    for row in summary["readings"]:
        row["aer"] = aer_of(board, row) if board is not None else None
    return Faithfulness(
        {
            **identity(model),
            "split": name,
            "target": target,
            "decoding": decoding,  # of the translations forced (target "own")
            "n": len(sentences),
            "skipped": skipped,
            "levels": levels,
            "signals": names,
            **draws,
            "baseline": BASELINE,
            "interval": INTERVAL,
            "aer_file": aer_file,
            **summary,
            **recorded_with(),  # where and when: for qkvmt results add=<its folder>
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "wall_s": round(time.time() - start, 1),
        }
    )
