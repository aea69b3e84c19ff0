"""Word links from two models, one for each direction (`Model.align_both`, and `Model.aer` and
`Model.align_corpus` with reverse=): like the forward and reverse runs of a statistical aligner,
each model links the pair by its default layer and head in its own direction (target→source),
and symmetrize= combines the two: their link sets (qkvmt.alignment.symmetrize) or their weights
(the soft methods of qkvmt.alignment.directions)."""

from collections.abc import Callable
from pathlib import Path

from qkvmt.alignment.directions import SOFT, Direction, TwoWay, both_ways, check_pair, checked_method, pair_method
from qkvmt.alignment.leaderboard import checked_gold_dev, scored, split_gold
from qkvmt.alignment.links import read_gold, to_pharaoh
from qkvmt.alignment.symmetrize import METHODS
from qkvmt.errors import UserError
from qkvmt.results.aer import AERReport
from qkvmt.results.two_way_alignment import TwoWayAlignment
from qkvmt.studies.model_protocol import ModelLike

THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)  # of the soft symmetrizations, scored on a gold set


def directions(model: ModelLike, reverse: ModelLike, rows: str, signal: str) -> tuple[Direction, Direction]:
    """`model` and `reverse`, each linking by its default layer and head in its own direction, reading
    `rows` and `signal`; a reverse model that does not pair with `model` is a UserError."""
    reading = {"rows": rows, "signal": signal}
    forward = Direction(model, model.policy(reading).one_way())
    back = Direction(reverse, reverse.policy(reading).one_way())
    check_pair(forward, back, (model.paths[0], reverse.paths[0]))
    return forward, back


def symmetrization(
    symmetrize: str, threshold: float | None, forward: Direction, reverse: Direction, scores_all: bool = False
) -> tuple[str, float]:
    """symmetrize= and symmetrize_threshold= for these two models, resolved by pair_method."""
    return pair_method(*checked_method(symmetrize, threshold), forward, reverse, scores_all)


def method_of(method: str, threshold: float) -> dict:
    """How the links were symmetrized, as outputs record it: the method, and a soft one's threshold."""
    return {"symmetrize": method} | ({"symmetrize_threshold": threshold} if method in SOFT else {})


def reading_name(method: str, threshold: float) -> str:
    """How a gold set's table names a symmetrization: a soft one with its threshold."""
    return f"{method}@{threshold:g}" if method in SOFT else method


def candidates(method: str, threshold: float) -> dict[str, Callable[[TwoWay], set]]:
    """Every reading of two models a gold set scores, by name: each direction alone, every hard
    symmetrization, and each soft one at THRESHOLDS and at `threshold`, named method@threshold."""
    out = {"forward": lambda t: t.forward_links, "reverse": lambda t: t.reverse_links}
    out |= {m: lambda t, m=m: t.links(m) for m in METHODS}
    for m in SOFT:
        for x in sorted({*THRESHOLDS, threshold}):
            out[reading_name(m, x)] = lambda t, m=m, x=x: t.links(m, x)
    return out


def sentence_both(
    forward: Direction, reverse: Direction, source: str, target: str | None, symmetrize: str, threshold, **decode
) -> TwoWayAlignment:
    """One sentence's links by both models, symmetrized; `target` None: the forward model's translation."""
    model = forward.model
    forced = model.forced(source, target, **decode)
    text = forced if isinstance(forced, str) else model.tokenizer.decode(forced)
    both = both_ways(forward, reverse, source, forced, text)
    if both is None:
        raise UserError("the sentence or its translation is longer than a model's positions: give a shorter sentence")
    method, threshold = symmetrization(symmetrize, threshold, forward, reverse)
    links = both.links(method, threshold)
    return TwoWayAlignment(
        source=source,
        translation=text,
        forced=target is not None,
        src_words=source.split(),
        tgt_words=text.split(),
        policies={"forward": forward.policy.to_dict(), "reverse": reverse.policy.to_dict()},
        reverse_ckpt_path=[str(p) for p in reverse.model.paths],
        symmetrize=method,
        symmetrize_threshold=threshold if method in SOFT else None,
        forward_links=sorted(both.forward_links),
        reverse_links=sorted(both.reverse_links),
        links=sorted(links),
        pharaoh=to_pharaoh(links),
    )


def aer_both(
    forward: Direction, reverse: Direction, gold_dir, gold_first: str, dev: int, symmetrize: str, threshold
) -> AERReport:
    """AER of each direction and every symmetrization (candidates); with dev=N the first N pairs
    choose the best of them and every figure comes from the rest."""
    g = read_gold(Path(gold_dir), forward.meta.src_lang, forward.meta.tgt_lang, gold_first)
    n_dev = checked_gold_dev(dev, len(g.src))
    readings, kept = [], []
    for k, (src, tgt) in enumerate(zip(g.src, g.tgt)):
        both = both_ways(forward, reverse, src, tgt, tgt)
        if both is not None:
            kept.append(k)
            readings.append(both)
    if not kept:
        raise UserError(f"no gold sentence pair in {gold_dir} fits both models' positions")
    split = split_gold(g, kept, n_dev)
    method, threshold = symmetrization(symmetrize, threshold, forward, reverse, scores_all=True)
    chosen = reading_name(method, threshold)
    hyps = {name: [read(t) for t in readings] for name, read in candidates(method, threshold).items()}
    table = {}
    for name, links in hyps.items():
        table[name] = scored(links, split.sure, split.possible, split.test)
        if split.dev:
            table[name]["dev_aer"] = scored(links, split.sure, split.possible, split.dev)["aer"]
    best = min(table, key=lambda name: table[name]["dev_aer" if split.dev else "aer"])
    scores = {
        "gold_dir": str(gold_dir),
        "n": len(split.test),  # the pairs every figure is scored on
        "dev": {"first_pairs": n_dev, "n": len(split.dev)} if split.dev else None,  # the pairs that chose "best"
        "skipped_too_long": len(g.src) - len(kept),
        "policies": {"forward": forward.policy.to_dict(), "reverse": reverse.policy.to_dict()},
        "reverse_ckpt_path": [str(p) for p in reverse.model.paths],
        **method_of(method, threshold),
        "symmetrized": table[chosen],
        "best": {"reading": best} | table[best],
        "by_method": table,  # forward, reverse, every symmetrization, the soft ones at each threshold
    }
    return AERReport(scores, pharaoh=[to_pharaoh(links) for links in hyps[chosen]])
