"""align(cfg): cross-attention alignments of one sentence, or AER against gold alignments for
every decoder layer × head and every layer's head average, and with leaderboard=true for every
signal's (qkvmt.analysis.signals) own layers and heads. The extraction itself (layer, head,
rows, direction, signal) is qkvmt.alignment.policy; this module does the command-line work.
"""

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.alignment.links import alignment_scores, pair_word_groups, read_gold
from qkvmt.alignment.policy import DIRECTIONS, ROWS, AlignmentPolicy, cross_signals, directed_links
from qkvmt.alignment.reference import reference_aligner, with_gold
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.analysis.forced import forced_attention, one_pass_signals
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import sha256, write_json
from qkvmt.pipeline.align_both import align_both
from qkvmt.pipeline.runs import (
    StagedOutput,
    beside_checkpoint,
    check_output_dir,
    decode_overrides,
    load_for_inference,
    run_data,
    run_folder,
)
from qkvmt.text.sources import required_text
from qkvmt.views.figures import aer_heatmap

log = logging.getLogger(__name__)


def best_file(cfg: DictConfig, paths: list[Path]) -> Path:
    """Where an AER run records its best policy: <run>/aer_<id>.json, one per checkpoint (or
    average), so a best head found for one checkpoint is never applied to another."""
    return beside_checkpoint(cfg, paths, "aer")


def gold_identity(gold_dir: Path, n_pairs: int, n_scored: int) -> dict:
    """Which gold set a result came from, exactly: its files' digest and how many pairs were scored."""
    h = hashlib.sha256()
    for name in sorted(p.name for p in gold_dir.iterdir() if p.is_file()):
        h.update(f"{name}\0{sha256(gold_dir / name)}\0".encode())
    return {"dir": str(gold_dir), "sha256": h.hexdigest(), "pairs": n_pairs, "scored": n_scored}


def record_best(path: Path, result: dict, copy: Path) -> None:
    """Record the result beside the checkpoint for alignment.head=best, unless a result from a
    larger gold set is there: a subset never replaces a full evaluation."""
    try:
        old = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        old = None  # unreadable: replaced by this complete result
    if old and old.get("gold", {}).get("scored", 0) > result["gold"]["scored"]:
        log.warning(
            "kept %s: it holds the result of %d scored pairs from %s, "
            "more than this run's %d (this run's result is in %s)",
            path,
            old["gold"]["scored"],
            old["gold"]["dir"],
            result["gold"]["scored"],
            copy,
        )
        return
    try:
        write_json(path, result)
    except OSError as e:
        log.warning("could not record the best head beside the checkpoint (%s); use alignment.aer_file=%s", e, copy)


def policy(cfg: DictConfig, model: Model) -> tuple[AlignmentPolicy, dict]:
    """The policy to extract links with, and what alignment.json records of it; head=best
    reads an AER run's result (its scores and file are recorded too)."""
    a, paths, c = cfg.alignment, model.paths, model.transformer.cfg
    if str(a.head) == "best":
        aer_file = Path(a.aer_file) if a.aer_file else best_file(cfg, paths)
        if not aer_file.is_file():
            raise UserError(
                f"alignment.head=best needs {aer_file}: "
                "run align.py gold_dir=... with this checkpoint first, or set alignment.aer_file"
            )
        best = json.loads(aer_file.read_text())["best"]
        if best["layer"] >= c.decoder_layers or (best["head"] != "mean" and best["head"] >= c.n_heads):
            raise UserError(
                f"{aer_file} was made for another model (its best is layer {best['layer']}, head {best['head']})"
            )
        pol = AlignmentPolicy.validated(
            best["layer"],
            best["head"],
            best["rows"],
            best["direction"],
            c.decoder_layers,
            c.n_heads,
            best.get("signal", "weights"),
        )  # results from before signals read weights
        return pol, best | {"from": str(aer_file)}
    default = model.default_policy

    def given(name):  # null: the checkpoint's default
        return getattr(default, name) if a[name] is None else a[name]

    pol = AlignmentPolicy.validated(
        given("layer"), given("head"), a.rows, given("direction"), c.decoder_layers, c.n_heads, a.signal
    )
    return pol, pol.to_dict()


def training_pairs_of(ckpt: Path) -> tuple[list[str], list[str]]:
    """The training pairs of a checkpoint's run (its data source and data.extra_train), read
    again through the data configuration its run.json records."""
    data = run_data(ckpt)
    if data is None:
        record = run_folder(ckpt) / "run.json"
        raise UserError(
            f"reference_aligner needs the run's training data, recorded in {record} by scripts/train.py, "
            "which is missing or older: use a checkpoint inside its training run folder"
        )
    return instantiate(OmegaConf.create(data)).training_pairs()


def reference_scores(
    cfg: DictConfig,
    training,
    gold,
    kept: list[int],
    sure,
    possible,
    langs: tuple[str, str],
    test: list[int],
    dev: list[int],
) -> dict:
    """AER of the statistical aligner on the gold pairs the attention was scored on (`test`,
    positions in `kept`; `dev` apart), having learned from the training pairs plus the gold
    sentences (never their links), each once."""
    src, tgt, positions = with_gold(*training, [gold.src[k] for k in kept], [gold.tgt[k] for k in kept])
    aligner = reference_aligner(cfg.reference_aligner, cfg.reference_symmetrization, "reference_aligner")
    forward, reverse = aligner.directional(src, tgt, langs)
    forward, reverse = [forward[k] for k in positions], [reverse[k] for k in positions]
    links = {"forward": forward, "reverse": reverse}
    links |= {method: [symmetrize(f, r, method) for f, r in zip(forward, reverse)] for method in METHODS}
    variants = {name: scored(a, sure, possible, test) for name, a in links.items()}
    head = variants[cfg.reference_symmetrization]
    dev_score = {"dev_aer": scored(links[cfg.reference_symmetrization], sure, possible, dev)["aer"]} if dev else {}
    return {
        "aligner": cfg.reference_aligner,
        "symmetrization": cfg.reference_symmetrization,
        **head,
        **dev_score,
        "training_pairs": len(training[0]),
        "gold_pairs_in_training": sum(k < len(training[0]) for k in positions),
        "variants": variants,
    }


def scored(hyp: list, sure: list, possible: list, positions: list[int]) -> dict:
    """alignment_scores over the pairs at `positions`."""
    return alignment_scores([hyp[i] for i in positions], [sure[i] for i in positions], [possible[i] for i in positions])


def scored_signals(cfg: DictConfig, default: AlignmentPolicy) -> list[str]:
    """The signals an AER run scores: alignment.signal and the default policy's, or with
    leaderboard=true every signal with cross-attention maps that costs about one pass, and
    those leaderboard_signals names (the gradients, whose many passes make them slow)."""
    a, named = cfg.alignment, list(cfg.leaderboard_signals or [])
    if a.signal not in cross_signals():
        raise UserError(f"alignment.signal={a.signal!r}: use one of {', '.join(cross_signals())}")
    if named and not cfg.leaderboard:
        raise UserError(f"leaderboard_signals={','.join(map(str, named))}: add leaderboard=true, whose table they join")
    for name in named:
        if name not in cross_signals():
            raise UserError(
                f"leaderboard_signals: {name!r} is no signal of cross-attention; "
                f"use some of {', '.join(cross_signals())}"
            )
    if not cfg.leaderboard:
        return list(dict.fromkeys((a.signal, default.signal)))
    return [s for s in cross_signals() if s in one_pass_signals() or s in named or s in (a.signal, default.signal)]


def _signal(policy: dict) -> str:
    """How a result names its signal: not at all for attention weights, as before there were others."""
    return "" if policy["signal"] == "weights" else f"{policy['signal']}, "


def _scores(s: dict) -> str:
    return f"AER {s['aer']:.3f}, precision {s['precision']:.3f}, recall {s['recall']:.3f}"


def align(cfg: DictConfig) -> dict:
    if not cfg.gold_dir and cfg.sentence is None:
        raise UserError(
            'give sentence="..." to align one sentence, or gold_dir=<folder> to score every head against gold links'
        )
    sentence = None if cfg.gold_dir else required_text(cfg.sentence, "sentence")  # before the slow load
    reference = None if cfg.reference is None else required_text(cfg.reference, "reference")
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    if cfg.reverse_ckpt_path:
        return align_both(cfg, model)
    if cfg.gold_dir:
        return align_gold(cfg, model)

    pol, recorded = policy(cfg, model)
    result = model.align(sentence, reference, pol, **decode_overrides(cfg.decode))
    result.policy = recorded
    staged = StagedOutput(cfg, model.paths, "align", kind="alignments")
    with staged as out:
        for name, write in result.files().items():
            write(out / name)
    print(result.translation)
    print(result.pharaoh)
    return {"translation": result.translation, "pharaoh": result.pharaoh, "output_dir": str(staged.final)}


def align_gold(cfg: DictConfig, model: Model) -> dict:
    meta, paths = model.meta, model.paths
    gold = read_gold(Path(cfg.gold_dir), meta.src_lang, meta.tgt_lang, cfg.gold_first)
    n_dev = cfg.gold_dev
    if isinstance(n_dev, bool) or not isinstance(n_dev, int) or not 0 <= n_dev < len(gold.src):
        raise UserError(
            f"gold_dev={n_dev!r}: give how many of the {len(gold.src)} gold pairs, from the first, choose the "
            "best extraction (0: none), fewer than all: the rest are the test"
        )
    default = model.default_policy
    signals = scored_signals(cfg, default)
    training = None
    if cfg.reference_aligner:  # fail before the slow part
        reference_aligner(cfg.reference_aligner, cfg.reference_symmetrization, "reference_aligner")
        training = training_pairs_of(paths[0])
    shapes = {}  # signal -> (its layers, its heads, 0 where it has none per head): known from the first pair
    hyps = {}  # (signal, layer, head, rows, direction) -> links of each kept pair
    kept, skipped = [], 0
    for k, (src, tgt) in enumerate(zip(gold.src, gold.tgt)):
        sa = forced_attention(
            model.transformer, model.tokenizer, src, tgt, meta.full_context_layer, analyses=set(signals)
        )
        groups = pair_word_groups(sa.src_tokens, sa.out_tokens, src, tgt)
        if groups is None:
            skipped += 1  # longer than the model's positions: cut, so words no longer line up
            continue
        sg, tg = groups
        kept.append(k)
        for s in signals:
            cross = sa.for_alignment.map("cross", s)
            n_layers, n_heads = shapes.setdefault(
                s, (len(cross.layers), 0 if cross.weights is None else cross.weights.shape[1])
            )
            for li in range(n_layers):
                for h in [*range(n_heads), "mean"]:
                    for r in ROWS:
                        m = AlignmentPolicy(li, h, r, signal=s).word_matrix(cross, tg, sg)
                        for d in DIRECTIONS:
                            hyps.setdefault((s, li, h, r, d), []).append(directed_links(m, d))
    if not kept:
        raise UserError(
            f"no gold sentence pair in {cfg.gold_dir} fits the model's {model.transformer.cfg.max_positions} positions"
        )
    sure, possible = [gold.sure[k] for k in kept], [gold.possible[k] for k in kept]
    # With gold_dev, the first pairs choose the best extraction and every figure reported comes
    # from the rest, which chose nothing.
    dev = [i for i, k in enumerate(kept) if k < n_dev]
    test = [i for i, k in enumerate(kept) if k >= n_dev]
    if not test or (n_dev and not dev):
        raise UserError(
            f"gold_dev={n_dev}: of the pairs that fit the model, none is left for the "
            f"{'test' if not test else 'dev'} part; choose another split"
        )
    table = {key: scored(a, sure, possible, test) for key, a in hyps.items()}

    def heads_of(signal: str) -> list:
        return [*range(shapes[signal][1]), "mean"]

    chooser = {key: scored(a, sure, possible, dev) for key, a in hyps.items()} if dev else table

    def on_dev(key) -> dict:
        return {"dev_aer": chooser[key]["aer"]} if dev else {}

    fields = ("signal", "layer", "head", "rows", "direction")
    best_key = min(chooser, key=lambda key: chooser[key]["aer"])
    best = dict(zip(fields, best_key)) | table[best_key] | on_dev(best_key)
    default_scores = (
        default.to_dict() | table[default.signal, default.layer, default.head, default.rows, default.direction]
    )
    reference = None
    if cfg.reference_aligner:
        reference = reference_scores(
            cfg, training, gold, kept, sure, possible, (meta.src_lang, meta.tgt_lang), test, dev
        )
    result = {
        "gold_dir": str(cfg.gold_dir),
        "gold": gold_identity(Path(cfg.gold_dir), len(gold.src), len(kept)),
        "direction_of_pair": f"{meta.src_lang}->{meta.tgt_lang}",
        "n": len(test),  # the pairs every figure below is scored on
        "dev": {"first_pairs": n_dev, "n": len(dev)} if dev else None,  # the pairs that chose "best"
        "skipped_too_long": skipped,
        "signal": cfg.alignment.signal,  # of "layers"
        "layers": {  # layerL -> headH or mean -> rows -> direction -> {aer, precision, recall, counts}
            f"layer{li}": {
                f"head{h}" if h != "mean" else "mean": {
                    r: {d: table[cfg.alignment.signal, li, h, r, d] for d in DIRECTIONS} for r in ROWS
                }
                for h in heads_of(cfg.alignment.signal)
            }
            for li in range(shapes[cfg.alignment.signal][0])
        },
        "best": best,
        "default": default_scores | {"supervised": bool(meta.alignment)},
        "reference": reference,
    }
    if cfg.leaderboard:  # every signal × layer × head × rows × direction, and the reference aligner's row, best first
        rows = [dict(zip(fields, key)) | table[key] | on_dev(key) for key in table]
        if reference:
            scores = {k: reference[k] for k in best if k in reference}
            rows.append(
                dict.fromkeys(fields) | {"signal": f"{reference['aligner']} ({reference['symmetrization']})"} | scores
            )
        result["leaderboard"] = sorted(rows, key=lambda row: row["dev_aer" if dev else "aer"])  # best first, as chosen
    grid = np.array(
        [
            [table[best["signal"], li, h, best["rows"], best["direction"]]["aer"] for h in heads_of(best["signal"])]
            for li in range(shapes[best["signal"]][0])
        ]
    )
    staged = StagedOutput(cfg, paths, "aer", kind="alignments")
    with staged as out:
        write_json(out / "aer.json", result)
        aer_heatmap(
            grid,
            [f"head {h}" for h in heads_of(best["signal"])[:-1]] + ["mean"],
            out / "aer.png",
            title=f"AER ({_signal(best)}{best['rows']} rows, {best['direction']})",
        )
    record_best(best_file(cfg, paths), result, staged.final / "aer.json")
    head_name = "the head average" if best["head"] == "mean" else f"head {best['head']}"
    chosen = f", chosen on the first {n_dev} pairs (AER {best['dev_aer']:.3f} there)" if dev else ""
    print(
        f"best: layer {best['layer']} {head_name} ({_signal(best)}{best['rows']} rows, {best['direction']}): "
        f"{_scores(best)} over {len(test)} pairs{chosen}"
    )
    what = "the supervised head" if meta.alignment else "the layer's head average"
    print(
        f"default: layer {default.layer} {what} ({default.rows} rows, {default.direction}): {_scores(default_scores)}"
    )
    if reference:
        print(f"reference: {reference['aligner']} ({reference['symmetrization']}): {_scores(reference)}")
    return result | {"output_dir": str(staged.final)}
