"""Word alignments symmetrized from two models, one for each direction (align.py with
reverse_ckpt_path=): like the forward and reverse runs of a statistical aligner, each model
links the pair by its default layer and head in its own direction (target→source), and
symmetrize= combines the two: their link sets (qkvmt.alignment.symmetrize) or their weights
(the soft methods of qkvmt.alignment.directions).

reverse_ckpt_path=auto, the default of align.py and the explorer, pairs a bundled model with
the bundled model of the other direction, so links out of the box use both; null links with
one model.
"""

import logging
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.alignment.directions import (
    AUTO,
    SOFT,
    Direction,
    TwoWay,
    both_ways,
    check_pair,
    check_unpaired,
    checked_method,
    pair_method,
)
from qkvmt.alignment.leaderboard import checked_gold_dev, scored, split_gold
from qkvmt.alignment.links import read_gold, to_pharaoh
from qkvmt.alignment.symmetrize import METHODS
from qkvmt.api import Model
from qkvmt.bundled import resolve, reverse_of
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.pipeline.runs import StagedOutput, decode_overrides
from qkvmt.text.sources import required_text

log = logging.getLogger(__name__)


THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)  # of the soft symmetrizations, scored on a gold set


def one_model_settings(cfg: DictConfig) -> list[str]:
    """The settings given that read one model's own layers and heads, or score them one by one
    (the AER table's choices): linking with a reverse model could not honour them."""
    a = cfg.alignment
    given = [f"alignment.{k}={a[k]}" for k in ("layer", "head", "direction") if a[k] is not None]
    if not cfg.gold_dir:
        return given
    given += ["leaderboard=true"] if cfg.leaderboard else []
    given += [f"reference_aligner={cfg.reference_aligner}"] if cfg.reference_aligner else []
    return given


def reverse_checkpoint(cfg: DictConfig, paths: list[Path], one_model: list[str] = ()) -> Path | None:
    """The checkpoint whose links are symmetrized with those of `paths` (ckpt_path), or None.

    reverse_ckpt_path=<path or bundled name>: that one; null: none; auto: the bundled model of
    the other direction when ckpt_path is a bundled model that has one (a run's checkpoint has
    no known partner). `one_model`: the settings given that read one model's own layers and
    heads (e.g. alignment.layer=1); beside them auto links with the one model, and an explicit
    reverse_ckpt_path, which could not honour them, is a UserError. Checked before any model
    loads, with symmetrize= and symmetrize_threshold=, which without a partner (given, not left
    to auto) could not take effect: a UserError."""
    given = cfg.reverse_ckpt_path
    if given is None:
        partner = None
    elif str(given) == AUTO:
        partner = None if len(paths) != 1 or one_model else reverse_of(paths[0])
        if partner is not None:
            log.info("linking with %s too, then symmetrizing (reverse_ckpt_path=null: this model alone)", partner.name)
    elif one_model:
        raise UserError(
            f"{one_model[0]} reads one model's own heads, which linking with two models cannot honour: drop it, "
            f"or drop reverse_ckpt_path={given} (reverse_ckpt_path=null links with ckpt_path alone)"
        )
    else:
        partner = resolve(given)
    method, threshold = checked_method(cfg.symmetrize, cfg.symmetrize_threshold)
    if partner is None:
        check_unpaired(
            method,
            threshold,
            " (reverse_ckpt_path=null, a run's checkpoint, or a setting that reads one model's heads)",
            "reverse_ckpt_path=<a model of the other direction>",
        )
    return partner


def both_directions(cfg: DictConfig, model: Model, reverse_path: Path) -> tuple[Direction, Direction]:
    """`model` and the model of `reverse_path`, each linking by its default layer and head in its
    own direction, with alignment.rows and alignment.signal; a reverse model that does not pair
    with `model` is a UserError."""
    reading = {"rows": cfg.alignment.rows, "signal": cfg.alignment.signal}
    other = Model.from_checkpoints([reverse_path], model.fabric)
    forward = Direction(model, model.policy(reading).one_way())
    reverse = Direction(other, other.policy(reading).one_way())
    check_pair(forward, reverse, (model.paths[0], reverse_path))
    return forward, reverse


def align_both(cfg: DictConfig, model: Model, reverse_path: Path) -> dict:
    paths = model.paths
    forward, reverse = both_directions(cfg, model, reverse_path)
    policies = {"forward": forward.policy.to_dict(), "reverse": reverse.policy.to_dict()}
    if cfg.gold_dir:
        return gold(cfg, forward, reverse, policies, paths)

    sentence = str(cfg.sentence)
    forced = model.forced(
        sentence,
        None if cfg.reference is None else required_text(cfg.reference, "reference"),
        **decode_overrides(cfg.decode),
    )
    target = forced if isinstance(forced, str) else model.tokenizer.decode(forced)
    both = both_ways(forward, reverse, sentence, forced, target)
    if both is None:
        raise UserError("the sentence or its translation is longer than a model's positions: give a shorter sentence")
    method, threshold = symmetrization(cfg, forward, reverse)
    links = both.links(method, threshold)
    data = {
        "source": sentence,
        "translation": target,
        "forced": cfg.reference is not None,
        "src_words": sentence.split(),
        "tgt_words": target.split(),
        "policies": policies,
        "reverse_ckpt_path": [str(p) for p in reverse.model.paths],
        **method_of(method, threshold),
        "forward_links": sorted(both.forward_links),
        "reverse_links": sorted(both.reverse_links),  # as (source word, target word), like the others
        "links": sorted(links),
        "pharaoh": to_pharaoh(links),
    }
    staged = StagedOutput(cfg, paths, "align", kind="alignments")
    with staged as out:
        write_json(out / "alignment.json", data)
    print(target)
    print(data["pharaoh"])
    return {"translation": target, "pharaoh": data["pharaoh"], "output_dir": str(staged.final)}


def symmetrization(
    cfg: DictConfig, forward: Direction, reverse: Direction, scores_all: bool = False
) -> tuple[str, float]:
    """symmetrize= and symmetrize_threshold= for these two models, resolved by pair_method."""
    return pair_method(*checked_method(cfg.symmetrize, cfg.symmetrize_threshold), forward, reverse, scores_all)


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


def gold(cfg: DictConfig, forward: Direction, reverse: Direction, policies: dict, paths: list[Path]) -> dict:
    """AER of each direction and every symmetrization (aer.json, and alignment.pharaoh by
    symmetrize=); with gold_dev=N the first N pairs choose the best of them and every figure
    comes from the rest."""
    g = read_gold(Path(cfg.gold_dir), forward.meta.src_lang, forward.meta.tgt_lang, cfg.gold_first)
    n_dev = checked_gold_dev(cfg.gold_dev, len(g.src))
    readings, kept = [], []
    for k, (src, tgt) in enumerate(zip(g.src, g.tgt)):
        both = both_ways(forward, reverse, src, tgt, tgt)
        if both is not None:
            kept.append(k)
            readings.append(both)
    if not kept:
        raise UserError(f"no gold sentence pair in {cfg.gold_dir} fits both models' positions")
    split = split_gold(g, kept, n_dev)
    method, threshold = symmetrization(cfg, forward, reverse, scores_all=True)
    chosen = reading_name(method, threshold)
    hyps = {name: [read(t) for t in readings] for name, read in candidates(method, threshold).items()}
    table = {}
    for name, links in hyps.items():
        table[name] = scored(links, split.sure, split.possible, split.test)
        if split.dev:
            table[name]["dev_aer"] = scored(links, split.sure, split.possible, split.dev)["aer"]
    key = "dev_aer" if split.dev else "aer"
    best = min(table, key=lambda name: table[name][key])
    result = {
        "gold_dir": str(cfg.gold_dir),
        "n": len(split.test),  # the pairs every figure is scored on
        "dev": {"first_pairs": n_dev, "n": len(split.dev)} if split.dev else None,  # the pairs that chose "best"
        "skipped_too_long": len(g.src) - len(kept),
        "policies": policies,
        "reverse_ckpt_path": [str(p) for p in reverse.model.paths],
        **method_of(method, threshold),
        "symmetrized": table[chosen],
        "best": {"reading": best} | table[best],
        "by_method": table,  # forward, reverse, every symmetrization, the soft ones at each threshold
    }
    staged = StagedOutput(cfg, paths, "aer", kind="alignments")
    with staged as out:
        write_json(out / "aer.json", result)
        # symmetrize='s links, one line per kept pair
        write_text(out / "alignment.pharaoh", "".join(to_pharaoh(links) + "\n" for links in hyps[chosen]))
    over = f"over {len(split.test)} pairs" + (f" (pairs {n_dev + 1}-{len(g.src)})" if split.dev else "")
    for name in dict.fromkeys(("forward", "reverse", chosen, best)):
        t = table[name]
        print(
            f"{'best: ' if name == best else ''}{name}: AER {t['aer']:.3f}, precision {t['precision']:.3f}, "
            f"recall {t['recall']:.3f} {over}"
            + (
                f", chosen on the first {n_dev} pairs (AER {t['dev_aer']:.3f} there)"
                if name == best and split.dev
                else ""
            )
        )
    return result | {"output_dir": str(staged.final)}
