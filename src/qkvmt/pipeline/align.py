"""align(cfg): cross-attention alignments of one sentence, of a corpus (src_file=, tgt_file=:
qkvmt.pipeline.align_corpus), or AER against gold alignments for
every decoder layer × head and every layer's head average, and with leaderboard=true for every
signal's (qkvmt.analysis.signals) own layers and heads. The extraction itself (layer, head,
rows, direction, signal) is qkvmt.alignment.policy, the search over every extraction against gold
links qkvmt.alignment.leaderboard; this module does the command-line work.
"""

import hashlib
import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.alignment.leaderboard import (
    GoldSplit,
    Leaderboard,
    candidate_links,
    checked_gold_dev,
    reference_scores,
    split_gold,
)
from qkvmt.alignment.links import read_gold
from qkvmt.alignment.policy import AlignmentPolicy, cross_signals
from qkvmt.alignment.reference import reference_aligner
from qkvmt.analysis.forced import one_pass_signals
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import sha256, write_json
from qkvmt.pipeline.align_both import align_both, one_model_settings, reverse_checkpoint
from qkvmt.pipeline.align_corpus import align_corpus, corpus_files
from qkvmt.pipeline.runs import (
    StagedOutput,
    beside_checkpoint,
    check_output_dir,
    checkpoint_paths,
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
        path.parent.mkdir(parents=True, exist_ok=True)  # a bundled model's results home may be new
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
                "run qkvmt align gold_dir=... with this checkpoint first, or set alignment.aer_file"
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
            f"reference_aligner needs the run's training data, recorded in {record} by qkvmt train, "
            "which is missing or older: use a checkpoint inside its training run folder"
        )
    return instantiate(OmegaConf.create(data)).training_pairs()


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


def check_gold_settings(cfg: DictConfig, corpus: bool) -> None:
    """The settings of scoring against gold links are refused without gold_dir=, where they
    could not take effect (reference_aligner also aligns a corpus beside)."""
    if cfg.gold_dir:
        return
    given = ["leaderboard=true"] if cfg.leaderboard else []
    given += [f"gold_dev={cfg.gold_dev}"] if cfg.gold_dev else []
    given += ["leaderboard_signals=..."] if cfg.leaderboard_signals else []
    given += [f"reference_aligner={cfg.reference_aligner}"] if cfg.reference_aligner and not corpus else []
    if given:
        raise UserError(
            f"{given[0]} belongs to scoring against gold links: add gold_dir=<folder>, or drop it"
            + ("" if corpus else " (reference_aligner= also aligns a corpus, src_file= tgt_file=, beside)")
        )


def align(cfg: DictConfig) -> dict:
    corpus = corpus_files(cfg)  # before the slow load, as every check of the settings
    if corpus is None and not cfg.gold_dir and cfg.sentence is None:
        raise UserError(
            'give sentence="..." to align one sentence, src_file=<path> tgt_file=<path> to align a corpus, '
            "or gold_dir=<folder> to score every head against gold links"
        )
    sentence = None if cfg.gold_dir or corpus else required_text(cfg.sentence, "sentence")
    reference = None if cfg.reference is None else required_text(cfg.reference, "reference")
    check_gold_settings(cfg, corpus is not None)
    check_output_dir(cfg)
    reverse = reverse_checkpoint(cfg, checkpoint_paths(cfg), one_model_settings(cfg))
    model = load_for_inference(cfg)
    if corpus:
        return align_corpus(cfg, model, corpus, reverse, None if reverse else policy(cfg, model))
    if reverse:
        return align_both(cfg, model, reverse)
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
    """AER of every extraction against the gold links in gold_dir (qkvmt.alignment.leaderboard):
    aer.json and aer.png, and the best recorded beside the checkpoint for alignment.head=best."""
    meta = model.meta
    gold = read_gold(Path(cfg.gold_dir), meta.src_lang, meta.tgt_lang, cfg.gold_first)
    n_dev = checked_gold_dev(cfg.gold_dev, len(gold.src))
    signals = scored_signals(cfg, model.default_policy)
    training = None
    if cfg.reference_aligner:  # fail before the slow part
        reference_aligner(cfg.reference_aligner, cfg.reference_symmetrization, "reference_aligner")
        training = training_pairs_of(model.paths[0])
    found = candidate_links(model, gold, signals)
    if not found.kept:
        raise UserError(
            f"no gold sentence pair in {cfg.gold_dir} fits the model's {model.transformer.cfg.max_positions} positions"
        )
    split = split_gold(gold, found.kept, n_dev)
    board = Leaderboard.scored(found, split)
    reference = None
    if cfg.reference_aligner:
        langs = (meta.src_lang, meta.tgt_lang)
        reference = reference_scores(cfg.reference_aligner, cfg.reference_symmetrization, training, gold, split, langs)
    result = gold_result(cfg, model, gold, board, split, reference)
    best = result["best"]
    grid = board.grid(best)
    staged = StagedOutput(cfg, model.paths, "aer", kind="alignments")
    with staged as out:
        write_json(out / "aer.json", result)
        aer_heatmap(
            grid,
            [f"head {h}" for h in found.heads_of(best["signal"])[:-1]] + ["mean"],
            out / "aer.png",
            title=f"AER ({_signal(best)}{best['rows']} rows, {best['direction']})",
        )
    record_best(best_file(cfg, model.paths), result, staged.final / "aer.json")
    print_gold(result, model.default_policy, n_dev)
    return result | {"output_dir": str(staged.final)}


def gold_result(cfg: DictConfig, model: Model, gold, board: Leaderboard, split: GoldSplit, reference) -> dict:
    """What aer.json records: the gold set and its split, alignment.signal's every layer and head,
    the best extraction, the checkpoint's default one, the reference aligner's, and with
    leaderboard=true every extraction of every signal."""
    meta, default = model.meta, model.default_policy
    default_key = (default.signal, default.layer, default.head, default.rows, default.direction)
    result = {
        "gold_dir": str(cfg.gold_dir),
        "gold": gold_identity(Path(cfg.gold_dir), len(gold.src), len(split.kept)),
        "direction_of_pair": f"{meta.src_lang}->{meta.tgt_lang}",
        "n": len(split.test),  # the pairs every figure below is scored on
        "dev": {"first_pairs": cfg.gold_dev, "n": len(split.dev)} if split.dev else None,  # the pairs that chose "best"
        "skipped_too_long": board.found.skipped,
        "signal": cfg.alignment.signal,  # of "layers"
        "layers": board.layers(cfg.alignment.signal),
        "best": board.best(),
        "default": default.to_dict() | board.table[default_key] | {"supervised": bool(meta.alignment)},
        "reference": reference,
    }
    if cfg.leaderboard:  # every signal × layer × head × rows × direction, and the reference aligner's row, best first
        result["leaderboard"] = board.rows(reference)
    return result


def print_gold(result: dict, default: AlignmentPolicy, n_dev: int) -> None:
    """The best extraction's scores, the default's and the reference aligner's, one line each."""
    best, reference = result["best"], result["reference"]
    head_name = "the head average" if best["head"] == "mean" else f"head {best['head']}"
    chosen = f", chosen on the first {n_dev} pairs (AER {best['dev_aer']:.3f} there)" if result["dev"] else ""
    print(
        f"best: layer {best['layer']} {head_name} ({_signal(best)}{best['rows']} rows, {best['direction']}): "
        f"{_scores(best)} over {result['n']} pairs{chosen}"
    )
    what = "the supervised head" if result["default"]["supervised"] else "the layer's head average"
    print(
        f"default: layer {default.layer} {what} ({default.rows} rows, {default.direction}): "
        f"{_scores(result['default'])}"
    )
    if reference:
        print(f"reference: {reference['aligner']} ({reference['symmetrization']}): {_scores(reference)}")
