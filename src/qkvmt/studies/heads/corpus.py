"""Each attention head's effect on the translation, masked one at a time (Michel et al. 2019), the
pruning curve, and what each head looks at (Voita et al. 2019): `Model.heads`, `qkvmt heads`.
The masking and the profiles are qkvmt.studies.heads.masking; this module runs them over a corpus."""

import logging
import sys
import time

from tqdm import tqdm

from qkvmt.alignment.directions import Direction
from qkvmt.alignment.links import GoldAlignments, alignment_scores
from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.trace import KINDS
from qkvmt.decoding.search import DecodeConfig
from qkvmt.results.heads import HeadsReport
from qkvmt.studies.checks import check_references, checked_heads
from qkvmt.studies.heads.masking import every_head, masked, profile
from qkvmt.studies.model_protocol import ModelLike
from qkvmt.text.metrics import score

log = logging.getLogger(__name__)


def heads(
    model: ModelLike,
    sources: list[str],
    references: list[str],
    settings: DecodeConfig,
    gold: GoldAlignments | None = None,
    prune_points: int = 10,
    profile_sentences: int = 200,
    name: str = "sentences",
) -> HeadsReport:
    """Every head masked alone on `sources` decoded by `settings` and scored against `references`
    (with `gold`, a cross head's AER too), the pruning curve in `prune_points` steps, and the
    profiles of the first `profile_sentences` pairs; `name` names the sentences."""
    start = time.time()
    checked_heads(prune_points, profile_sentences)
    check_references(sources, references, name)
    every = every_head(model.transformer)
    base = score(model.translate(sources, settings), references)
    base_aer = gold_aer(model, gold) if gold else None
    log.info("%s: %d sentences, %d heads; unmasked BLEU %.2f", name, len(sources), len(every), base["bleu"])
    rows = mask_each_head(model, every, sources, references, settings, base, gold, base_aer)
    profiles = head_profiles(model, sources[:profile_sentences], references[:profile_sentences])
    for row in rows:
        row.update(vars(profiles[row["kind"], row["layer"], row["head"]]))
    curve = pruning_curve(model, rows, sources, references, settings, base, prune_points)
    return HeadsReport(
        source=name,
        n=len(sources),
        decode=vars(settings),
        bleu=base["bleu"],
        chrf=base["chrf"],
        aer=base_aer,
        signatures=base["signatures"],
        heads=rows,
        pruning=curve,
        checkpoints=[str(p) for p in model.paths],
        wall_s=round(time.time() - start, 1),
    )


def mask_each_head(model: ModelLike, every: list, src, refs, settings, base: dict, gold, base_aer) -> list[dict]:
    """Each head masked alone: BLEU and chrF and what they lost, and with gold a cross head's AER
    and its rise."""
    rows = []
    for head in tqdm(every, desc="masking heads", unit="head", file=sys.stderr, dynamic_ncols=True):
        with masked(model.transformer, [head]):
            s = score(model.translate(src, settings), refs)
            aer = gold_aer(model, gold) if gold and head[0] == "cross" else None
        rows.append(
            {
                "kind": head[0],
                "layer": head[1],
                "head": head[2],
                "bleu": s["bleu"],
                "chrf": s["chrf"],
                "bleu_drop": base["bleu"] - s["bleu"],
                "chrf_drop": base["chrf"] - s["chrf"],
                "aer": aer,
                "aer_rise": None if aer is None else aer - base_aer,
            }
        )
    return rows


def gold_aer(model: ModelLike, gold: GoldAlignments) -> float:
    """AER of the model's default alignment policy on the gold pairs that fit its positions."""
    direction, hyps, sure, possible = Direction(model, model.default_policy), [], [], []
    for src, tgt, s, p in zip(gold.src, gold.tgt, gold.sure, gold.possible):
        links = direction.links(src, tgt, tgt)
        if links is not None:
            hyps.append(links)
            sure.append(s)
            possible.append(p)
    return alignment_scores(hyps, sure, possible)["aer"]


def head_profiles(model: ModelLike, src: list[str], refs: list[str]) -> dict:
    """(kind, layer, head) -> HeadProfile, from forced passes over the given pairs."""
    weights, keys = {}, {kind: [] for kind in KINDS}
    for s, r in zip(src, refs):
        if not (s.strip() and r.strip()):
            continue
        sa = forced_attention(model.transformer, model.tokenizer, s, r, analyses={"weights"})  # all a profile reads
        for kind in KINDS:
            m = sa.map(kind)
            keys[kind].append(m.cols)
            for layer, per_layer in enumerate(m.weights):
                for head, w in enumerate(per_layer):
                    weights.setdefault((kind, layer, head), []).append(w)
    return {key: profile(ws, keys[key[0]], positional=key[0] != "cross") for key, ws in weights.items()}


def pruning_curve(model: ModelLike, rows: list[dict], src, refs, settings, base: dict, points: int) -> list[dict]:
    """BLEU and chrF with the least important heads (least BLEU lost alone first) masked
    together: 1/points of them, 2/points, ..., all (Michel et al.'s curve); [] for points=0."""
    if points <= 0:
        return []
    order = [(r["kind"], r["layer"], r["head"]) for r in sorted(rows, key=lambda r: r["bleu_drop"])]
    counts = sorted({max(1, round(k * len(order) / points)) for k in range(1, points + 1)})
    curve = [{"removed": 0, "bleu": base["bleu"], "chrf": base["chrf"]}]
    for n in tqdm(counts, desc="pruning", unit="step", file=sys.stderr, dynamic_ncols=True):
        with masked(model.transformer, order[:n]):
            s = score(model.translate(src, settings), refs)
        curve.append({"removed": n, "bleu": s["bleu"], "chrf": s["chrf"], "last": list(order[n - 1])})
    return curve
