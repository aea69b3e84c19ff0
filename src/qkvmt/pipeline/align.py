"""align(cfg): word links from cross-attention, through qkvmt.Model: of one sentence (Model.align,
or Model.align_both with a model of the other direction), of a corpus (src_file=, tgt_file=:
Model.align_corpus), or scored against gold links (gold_dir=: Model.aer). The settings are read
and checked by qkvmt.pipeline.align_settings; this module calls the model, saves and prints."""

import json
import logging
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import write_json
from qkvmt.pipeline.align_settings import (
    best_file,
    check_gold_settings,
    check_policy_settings,
    corpus_files,
    one_model_settings,
    policy,
    reverse_checkpoint,
    training_pairs_of,
)
from qkvmt.pipeline.inference_setup import (
    check_output_dir,
    checkpoint_paths,
    decode_overrides,
    load_for_inference,
    save_result,
)
from qkvmt.text.sources import LineFile, required_text

log = logging.getLogger(__name__)


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
    check_policy_settings(cfg)
    decode = decode_overrides(cfg.decode)
    check_output_dir(cfg)
    reverse = reverse_checkpoint(cfg, checkpoint_paths(cfg), one_model_settings(cfg))
    model = load_for_inference(cfg)
    if corpus:
        return align_corpus(cfg, model, corpus, reverse)
    if cfg.gold_dir:
        return align_gold(cfg, model, reverse)
    a = cfg.alignment
    if reverse:
        two = {"rows": a.rows, "signal": a.signal, "symmetrize": cfg.symmetrize, "threshold": cfg.symmetrize_threshold}
        result = model.align_both(sentence, reverse, reference, **two, **decode)
    else:
        pol, recorded = policy(cfg, model)
        result = model.align(sentence, reference, pol, **decode)
        result.policy = recorded
    final = save_result(cfg, model.paths, result, "align", "alignments")
    print(result.translation)
    print(result.pharaoh)
    return {"translation": result.translation, "pharaoh": result.pharaoh, "output_dir": str(final)}


def align_corpus(cfg: DictConfig, model: Model, files: tuple[LineFile, LineFile], reverse: Path | None) -> dict:
    """alignment.pharaoh (one line per pair) and corpus.json (with reference_aligner=,
    reference.pharaoh too) in output_dir (default <run>/alignments/corpus_<time>)."""
    a, (src, tgt) = cfg.alignment, files
    settings = {"batch_tokens": cfg.batch_tokens, "chunk_pairs": cfg.chunk_pairs}
    settings |= {"reference_aligner": cfg.reference_aligner, "reference_symmetrization": cfg.reference_symmetrization}
    if reverse:
        two = {"rows": a.rows, "signal": a.signal, "symmetrize": cfg.symmetrize, "threshold": cfg.symmetrize_threshold}
        result = model.align_corpus(src, tgt, reverse, **two, **settings)
    else:
        pol, recorded = policy(cfg, model)
        result = model.align_corpus(src, tgt, policy=pol, **settings)
        result.settings["policy"] = recorded  # head=best: with the AER result it came from
    result.inputs = {"src_file": str(src.path), "tgt_file": str(tgt.path)}
    final = save_result(cfg, model.paths, result, "corpus", "alignments")
    for warning in result.warnings():
        log.warning(warning)
    print(final / "alignment.pharaoh")
    return result.summary() | {"output_dir": str(final)}


def align_gold(cfg: DictConfig, model: Model, reverse: Path | None) -> dict:
    """AER of every extraction against the gold links in gold_dir: aer.json and aer.png (one model;
    the best recorded beside the checkpoint for alignment.head=best), or aer.json and
    alignment.pharaoh (two models)."""
    a, gold = cfg.alignment, {"gold_first": cfg.gold_first, "dev": cfg.gold_dev, "signal": cfg.alignment.signal}
    if reverse:
        two = {"rows": a.rows, "symmetrize": cfg.symmetrize, "threshold": cfg.symmetrize_threshold}
        result = model.aer(cfg.gold_dir, reverse, **two, **gold)
    else:
        result = model.aer(
            cfg.gold_dir,
            leaderboard=cfg.leaderboard,
            leaderboard_signals=cfg.leaderboard_signals,
            reference_aligner=cfg.reference_aligner,
            reference_symmetrization=cfg.reference_symmetrization,
            training_pairs=lambda: training_pairs_of(model.paths[0]),  # read only where an aligner learns
            **gold,
        )
    final = save_result(cfg, model.paths, result, "aer", "alignments")
    if not reverse:
        record_best(best_file(cfg, model.paths), result.scores, final / "aer.json")
    print(result.summary())
    return result.scores | {"output_dir": str(final)}


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
