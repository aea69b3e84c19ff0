"""Every way of reading word links from one model scored against gold links (`Model.aer`, `qkvmt
align gold_dir=...`): each signal × decoder layer × head or head average × rows × direction
(qkvmt.alignment.leaderboard), the best chosen, beside the model's default reading and, if asked,
a statistical reference aligner's."""

import hashlib
from collections.abc import Callable
from pathlib import Path

from qkvmt.alignment.leaderboard import (
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
from qkvmt.errors import UserError
from qkvmt.files import sha256
from qkvmt.host.machine import recorded_with
from qkvmt.results.aer import AERReport
from qkvmt.studies.model_protocol import ModelLike, identity

Pairs = tuple[list[str], list[str]]


def gold_identity(gold_dir: Path, n_pairs: int, n_scored: int) -> dict:
    """Which gold set a result came from, exactly: its files' digest and how many pairs were scored."""
    h = hashlib.sha256()
    for name in sorted(p.name for p in gold_dir.iterdir() if p.is_file()):
        h.update(f"{name}\0{sha256(gold_dir / name)}\0".encode())
    return {"dir": str(gold_dir), "sha256": h.hexdigest(), "pairs": n_pairs, "scored": n_scored}


def scored_signals(signal: str, leaderboard: bool, named: list, default: AlignmentPolicy) -> list[str]:
    """The signals an AER run scores: `signal` and the default policy's, or with `leaderboard`
    every signal with cross-attention maps that costs about one pass, and those `named`
    (leaderboard_signals: the gradients, whose many passes make them slow)."""
    if signal not in cross_signals():
        raise UserError(f"alignment.signal={signal!r}: use one of {', '.join(cross_signals())}")
    if named and not leaderboard:
        raise UserError(f"leaderboard_signals={','.join(map(str, named))}: add leaderboard=true, whose table they join")
    for name in named:
        if name not in cross_signals():
            raise UserError(
                f"leaderboard_signals: {name!r} is no signal of cross-attention; "
                f"use some of {', '.join(cross_signals())}"
            )
    if not leaderboard:
        return list(dict.fromkeys((signal, default.signal)))
    return [s for s in cross_signals() if s in one_pass_signals() or s in named or s in (signal, default.signal)]


def training_of(aligner: str | None, symmetrization: str, pairs: Pairs | Callable[[], Pairs] | None) -> Pairs | None:
    """The pairs the reference aligner learns from (`pairs`, or what calling it reads), checked
    with the aligner before the slow part; None without an aligner."""
    if not aligner:
        return None
    reference_aligner(aligner, symmetrization, "reference_aligner")
    pairs = pairs() if callable(pairs) else pairs
    if pairs is None:
        raise UserError("reference_aligner needs training_pairs: the (sources, targets) it learns from")
    return pairs


def aer(
    model: ModelLike,
    gold_dir,
    gold_first: str = "de",
    dev: int = 0,
    signal: str = "weights",
    leaderboard: bool = False,
    leaderboard_signals: list | None = None,
    reference: tuple[str | None, str] = (None, "grow-diag-final-and"),
    training_pairs: Pairs | Callable[[], Pairs] | None = None,
) -> AERReport:
    """AER of every extraction against the gold links in gold_dir; `reference`: a reference
    aligner's name (None: none) and the symmetrization its headline reads."""
    meta, default = model.meta, model.default_policy
    gold = read_gold(Path(gold_dir), meta.src_lang, meta.tgt_lang, gold_first)
    n_dev = checked_gold_dev(dev, len(gold.src))
    signals = scored_signals(signal, leaderboard, list(leaderboard_signals or []), default)
    training = training_of(*reference, training_pairs)  # before the slow part
    found = candidate_links(model, gold, signals)
    if not found.kept:
        raise UserError(
            f"no gold sentence pair in {gold_dir} fits the model's {model.transformer.cfg.max_positions} positions"
        )
    split = split_gold(gold, found.kept, n_dev)
    board = Leaderboard.scored(found, split)
    ref = reference_scores(*reference, training, gold, split, (meta.src_lang, meta.tgt_lang)) if training else None
    default_key = (default.signal, default.layer, default.head, default.rows, default.direction, default.drop)
    scores = {
        "model": identity(model)["model"],
        "gold_dir": str(gold_dir),
        "gold": gold_identity(Path(gold_dir), len(gold.src), len(split.kept)),
        "direction_of_pair": f"{meta.src_lang}->{meta.tgt_lang}",
        "n": len(split.test),  # the pairs every figure below is scored on
        "dev": {"first_pairs": dev, "n": len(split.dev)} if split.dev else None,  # the pairs that chose "best"
        "skipped_too_long": board.found.skipped,
        "signal": signal,  # of "layers"
        "layers": board.layers(signal),
        "best": board.best(),
        "default": default.to_dict() | board.table[default_key] | {"supervised": bool(meta.alignment)},
        "reference": ref,
        **recorded_with(),  # where and when: for qkvmt results add=<its folder>
    }
    if leaderboard:  # every signal × layer × head × rows × direction, and the reference aligner's row, best first
        scores["leaderboard"] = board.rows(ref)
    best = scores["best"]
    heads = [f"head {h}" for h in found.heads_of(best["signal"])[:-1]] + ["mean"]
    return AERReport(scores, grid=board.grid(best), heads=heads)
