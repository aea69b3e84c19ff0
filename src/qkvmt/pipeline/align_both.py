"""Word alignments symmetrized from two models, one for each direction (align.py with
reverse_ckpt_path=): like the forward and reverse runs of a statistical aligner, each model
links the pair by its default layer and head in its own direction (target→source), and
qkvmt.alignment.symmetrize combines the two link sets.
"""

import logging
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.alignment.directions import Direction, both_ways, check_pair
from qkvmt.alignment.links import alignment_scores, read_gold, to_pharaoh
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.api import Model
from qkvmt.bundled import resolve
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.pipeline.runs import StagedOutput, decode_overrides
from qkvmt.text.sources import required_text

log = logging.getLogger(__name__)


def both_directions(cfg: DictConfig, model: Model) -> tuple[Direction, Direction]:
    """`model` and the model of reverse_ckpt_path, each with the policy it links by; a bad
    symmetrize= or a reverse model that does not pair with `model` is a UserError."""
    if cfg.symmetrize not in METHODS:
        raise UserError(f"symmetrize={cfg.symmetrize!r}: use one of {', '.join(METHODS)}")
    reverse_path = resolve(cfg.reverse_ckpt_path)
    forward = Direction(model)
    reverse = Direction(Model.from_checkpoints([reverse_path], model.fabric))
    check_pair(forward, reverse, (model.paths[0], reverse_path))
    return forward, reverse


def align_both(cfg: DictConfig, model: Model) -> dict:
    paths = model.paths
    forward, reverse = both_directions(cfg, model)
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
    f, r = both
    links = symmetrize(f, r, cfg.symmetrize)
    data = {
        "source": sentence,
        "translation": target,
        "forced": cfg.reference is not None,
        "src_words": sentence.split(),
        "tgt_words": target.split(),
        "policies": policies,
        "symmetrize": cfg.symmetrize,
        "forward_links": sorted(f),
        "reverse_links": sorted(r),  # as (source word, target word), like the others
        "links": sorted(links),
        "pharaoh": to_pharaoh(links),
    }
    staged = StagedOutput(cfg, paths, "align", kind="alignments")
    with staged as out:
        write_json(out / "alignment.json", data)
    print(target)
    print(data["pharaoh"])
    return {"translation": target, "pharaoh": data["pharaoh"], "output_dir": str(staged.final)}


def gold(cfg: DictConfig, forward: Direction, reverse: Direction, policies: dict, paths: list[Path]) -> dict:
    g = read_gold(Path(cfg.gold_dir), forward.meta.src_lang, forward.meta.tgt_lang, cfg.gold_first)
    hyps: dict[str, list] = {"forward": [], "reverse": []}
    kept = []
    for k, (src, tgt) in enumerate(zip(g.src, g.tgt)):
        both = both_ways(forward, reverse, src, tgt, tgt)
        if both is None:
            continue
        kept.append(k)
        hyps["forward"].append(both[0])
        hyps["reverse"].append(both[1])
    if not kept:
        raise UserError(f"no gold sentence pair in {cfg.gold_dir} fits both models' positions")
    for method in METHODS:
        hyps[method] = [symmetrize(f, r, method) for f, r in zip(hyps["forward"], hyps["reverse"])]
    sure, possible = [g.sure[k] for k in kept], [g.possible[k] for k in kept]
    table = {name: alignment_scores(links, sure, possible) for name, links in hyps.items()}
    result = {
        "gold_dir": str(cfg.gold_dir),
        "n": len(kept),
        "skipped_too_long": len(g.src) - len(kept),
        "policies": policies,
        "symmetrize": cfg.symmetrize,
        "symmetrized": table[cfg.symmetrize],
        "by_method": table,  # forward, reverse, and every symmetrization
    }
    staged = StagedOutput(cfg, paths, "aer", kind="alignments")
    with staged as out:
        write_json(out / "aer.json", result)
        # the chosen method's links, one line per kept pair
        write_text(out / "alignment.pharaoh", "".join(to_pharaoh(links) + "\n" for links in hyps[cfg.symmetrize]))
    for name in ("forward", "reverse", cfg.symmetrize):
        s = table[name]
        print(
            f"{name}: AER {s['aer']:.3f}, precision {s['precision']:.3f}, "
            f"recall {s['recall']:.3f} over {len(kept)} pairs"
        )
    return result | {"output_dir": str(staged.final)}
