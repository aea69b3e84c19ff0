"""heads(cfg): each attention head's effect on the translation, masked one at a time (Michel et
al. 2019), the pruning curve, and what each head looks at (Voita et al. 2019)."""

import logging
import sys
import time
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm import tqdm

from qkvmt.alignment.directions import Direction
from qkvmt.alignment.links import alignment_scores, read_gold
from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.heads import every_head, masked, profile
from qkvmt.analysis.trace import KINDS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import write_json
from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.runs import StagedOutput, beside_checkpoint, check_output_dir, load_for_inference
from qkvmt.text.metrics import score
from qkvmt.views.heads import HeadsReport

log = logging.getLogger(__name__)


def heads(cfg: DictConfig) -> dict:
    start = time.time()
    check_output_dir(cfg)
    gold = None
    model = load_for_inference(cfg)
    if cfg.gold_dir:  # before the slow part
        gold = read_gold(Path(cfg.gold_dir), model.meta.src_lang, model.meta.tgt_lang, cfg.gold_first)
    src, refs, name = read_inputs(cfg, model.meta, model.paths[0])
    if not src or not any(r.strip() for r in refs):
        raise UserError(f"{name} has no references to score against: give a split or ref_file with translations")
    settings = instantiate(cfg.decode)
    every = every_head(model.transformer)
    base = score(model.translate(src, settings), refs)
    base_aer = gold_aer(model, gold) if gold else None
    log.info("%s: %d sentences, %d heads; unmasked BLEU %.2f", name, len(src), len(every), base["bleu"])
    rows = mask_each_head(model, every, src, refs, settings, base, gold, base_aer)
    profiles = head_profiles(model, src[: cfg.profile_sentences], refs[: cfg.profile_sentences])
    for row in rows:
        row.update(vars(profiles[row["kind"], row["layer"], row["head"]]))
    curve = pruning_curve(model, rows, src, refs, settings, base, cfg.prune_points)
    report = HeadsReport(
        source=name,
        n=len(src),
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
    final = write_report(cfg, model, name, report)
    top = sorted(rows, key=lambda r: -r["bleu_drop"])[:5]
    print(f"unmasked: BLEU {base['bleu']:.2f}, chrF {base['chrf']:.2f} ({base['signatures']['bleu']})")
    for r in top:
        print(f"  {r['kind']:>7} layer {r['layer']} head {r['head']}: BLEU -{r['bleu_drop']:.2f} when masked")
    print(f"{len(rows)} heads in {report.wall_s:.0f} s; wrote {final}")
    return report.to_dict() | {"output_dir": str(final)}


def mask_each_head(model: Model, every: list, src, refs, settings, base: dict, gold, base_aer) -> list[dict]:
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


def write_report(cfg: DictConfig, model: Model, name: str, report: HeadsReport) -> Path:
    """The report's files in the output folder, and heads.json beside the checkpoint too (where
    evaluate.py's report.html finds it); the output folder."""
    staged = StagedOutput(cfg, model.paths, name, kind="heads")
    with staged as out:
        for file, write in report.files().items():
            write(out / file)
    try:  # evaluate.py's report.html of this checkpoint shows it
        write_json(beside_checkpoint(cfg, model.paths, "heads"), report.to_dict())
    except OSError as e:
        log.warning("could not record the heads beside the checkpoint (%s); they are in %s", e, staged.final)
    return staged.final


def gold_aer(model: Model, gold) -> float:
    """AER of the model's default alignment policy on the gold pairs that fit its positions."""
    direction, hyps, sure, possible = Direction(model, model.default_policy), [], [], []
    for src, tgt, s, p in zip(gold.src, gold.tgt, gold.sure, gold.possible):
        links = direction.links(src, tgt, tgt)
        if links is not None:
            hyps.append(links)
            sure.append(s)
            possible.append(p)
    return alignment_scores(hyps, sure, possible)["aer"]


def head_profiles(model: Model, src: list[str], refs: list[str]) -> dict:
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


def pruning_curve(model: Model, rows: list[dict], src, refs, settings, base: dict, points: int) -> list[dict]:
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
