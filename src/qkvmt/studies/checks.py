"""The checks of what the studies are given: each study runs its own, and a command runs the same
before its model loads, so that a bad setting is refused at once. Their words name the commands'
settings."""

import json
from collections.abc import Sequence, Set
from pathlib import Path

from qkvmt.analysis.inspection import checked_kind  # noqa: F401  (inspect's, run before its model loads)
from qkvmt.analysis.signals import SIGNALS, cross_signals
from qkvmt.errors import UserError
from qkvmt.setting_types import as_typed, whole_number

PATCH_METHODS = ("patching", "attribution")  # Model.patch_study's: real patching, or its gradient estimate
STUDIES = {"swap": ("swap",), "patch": ("patch",), "both": ("swap", "patch")}  # of keys and values: what each runs


def whole_numbers(counts: dict) -> None:
    """Each of `counts` ({setting: value}) a whole number of at least 1, or a UserError naming it."""
    for key, value in counts.items():
        whole_number(key, value)


def patch_settings(method: str, batch_size, check) -> None:
    """Model.patch_study's settings (qkvmt patch's), each a one-line UserError naming it."""
    if method not in PATCH_METHODS:
        raise UserError(f"method={method!r}: use one of {', '.join(PATCH_METHODS)}")
    whole_number("batch_size", batch_size, least=1)
    whole_number("check", check, least=0)


def sentences(lines, name: str) -> list[str]:
    """`lines` as a list of sentences; one text is a UserError, not a list of its characters."""
    if isinstance(lines, str):
        raise UserError(f"{name} is a list of sentences: give [text, ...], not one text")
    return list(lines)


def checked_heads(prune_points, profile_sentences) -> None:
    """heads' counts: the pruning curve's steps (0: no curve) and the pairs profiled (at least one,
    as a slice of the pairs would silently drop the last for -1)."""
    whole_number("prune_points", prune_points, least=0)
    whole_number("profile_sentences", profile_sentences)


def check_references(sources: list[str], references: list[str], name: str) -> None:
    """Sentences to mask heads on, with references to score them against (heads)."""
    if not sources or not any(r.strip() for r in references):
        raise UserError(f"{name} has no references to score against: give a split or ref_file with translations")


def paired(sources: list[str], references: list[str], n: int) -> list[tuple[str, str]]:
    """The first n pairs that have both a source and a reference (sinks); an empty list, references
    of another length or n below 1 is a UserError."""
    whole_numbers({"n": n})
    if not sources:
        raise UserError("sources is empty: give at least one sentence")
    same_length(references, sources, "references")
    pairs = [(s, r) for s, r in zip(sources, references) if s.strip() and r.strip()]
    if not pairs:
        raise UserError("no pair has both a source and a reference: give sentences with their translations")
    return pairs[:n]


def checked_study(study: str, n: int, substitutes: int) -> tuple[str, ...]:
    """The studies of keys and values `study` names; every bad setting is a UserError, before any work."""
    if study not in STUDIES:
        raise UserError(f"study={study!r}: use one of {', '.join(STUDIES)}")
    whole_numbers({"n": n, "substitutes": substitutes})
    return STUDIES[study]


def checked_faithfulness(signals, levels, counts: dict, seed) -> tuple[list[str], list[float]]:
    """faithfulness's signals (None: every one with cross-attention maps) and levels, `counts`
    ({name: value}, each a whole number of at least 1) and the draws' seed (numpy's takes 0 or
    more); every bad setting is a UserError."""
    known = cross_signals()
    signals = [signals] if isinstance(signals, str) else signals  # one name, as signals=alti
    if signals is not None and not isinstance(signals, list | tuple):
        raise UserError(f"signals={as_typed(signals)}: list some of {', '.join(known)}, or null for all")
    names = known if signals is None else [str(s) for s in signals]
    for name in names:
        if name not in known:
            raise UserError(
                f"signals: {name!r} is not a signal with cross-attention maps: use some of {', '.join(known)}"
            )
    if not names:
        raise UserError(f"signals=[]: name at least one of {', '.join(known)}")
    levels = list(levels) if isinstance(levels, list | tuple) else [levels]
    if not levels or any(isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1 for f in levels):
        raise UserError(f"levels={levels}: give fractions of the source tokens in (0, 1], e.g. [0.1,0.2,0.3,0.4,0.5]")
    whole_numbers(counts)
    whole_number("seed", seed, least=0)
    return names, [float(f) for f in levels]


TARGETS = ("reference", "own")  # what faithfulness forces: teacher forcing, or the model's own translations


def checked_target(target) -> str:
    """faithfulness's target, one of TARGETS."""
    if target not in TARGETS:
        raise UserError(
            f"target={target!r}: force the pass on reference (the references) or own (the model's own translations)"
        )
    return target


def read_leaderboard(path) -> list[dict] | None:
    """The leaderboard of an aer.json that `qkvmt align gold_dir=... leaderboard=true` wrote, whose
    AER faithfulness shows beside each reading (None without `path`)."""
    if path is None:
        return None
    try:
        board = json.loads(Path(path).read_text(encoding="utf-8")).get("leaderboard")
    except (OSError, ValueError, AttributeError) as e:
        raise UserError(f"aer_file={path} is not readable as the aer.json of qkvmt align ({e})") from None
    if not isinstance(board, list):
        raise UserError(
            f"aer_file={path} has no leaderboard: write it with qkvmt align gold_dir=<dir> leaderboard=true"
        )
    return board


def same_length(lines: list[str], sources: list[str], what: str) -> None:
    """References (a file of tokenized ones, a list: `what` names them) with one line per source."""
    if len(lines) != len(sources):
        raise UserError(f"{what} has {len(lines)} lines, the source has {len(sources)}: give one per source")


def report_signals(names) -> set[str]:
    """The signals evaluate's report shows (attention.signals): None, every registered one; else the
    ones listed, each checked by name before anything runs."""
    if names is None:
        return set(SIGNALS)
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, Sequence | Set):  # attention.signals=true names none; a set: the names checked once
        raise UserError(f"attention.signals={as_typed(names)}: list some of {', '.join(SIGNALS)}, or null for all")
    unknown = [n for n in names if n not in SIGNALS]
    if unknown:
        raise UserError(f"attention.signals: {unknown[0]} is no signal; list some of {', '.join(SIGNALS)}")
    return {"weights", *names}
