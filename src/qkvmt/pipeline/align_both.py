"""Word alignments symmetrized from two models, one for each direction (align.py with
reverse_ckpt_path=): like the forward and reverse runs of a statistical aligner, each model
links the pair by its default layer and head in its own direction (target→source), and
qkvmt.alignment.symmetrize combines the two link sets.
"""

import logging
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.alignment.links import Link, alignment_scores, pair_word_groups, read_gold, to_pharaoh
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.pipeline.runs import StagedOutput, decode_overrides
from qkvmt.text.sources import required_text
from qkvmt.views.sentence_attention import forced_attention

log = logging.getLogger(__name__)


class Direction:
    """One model with the policy it links by: its default, target→source."""

    def __init__(self, model: Model):
        self.model, self.meta = model, model.meta
        self.policy = model.default_policy.one_way()

    def links(self, source: str, target: str | list[int], target_text: str) -> set[Link] | None:
        """(source word, target word) links; None when the subwords do not group into the
        whitespace words (a pair cut at the model's positions)."""
        m = self.model
        sa = forced_attention(m.transformer, m.tokenizer, source, target, self.meta.full_context_layer)
        groups = pair_word_groups(sa.src_tokens, sa.out_tokens, source, target_text)
        return None if groups is None else self.policy.links(sa.map("cross", self.policy.signal), groups[1], groups[0])


def check_pair(forward: Direction, reverse: Direction, paths: tuple[Path, Path]) -> None:
    f, r = forward.meta, reverse.meta
    if (r.src_lang, r.tgt_lang) != (f.tgt_lang, f.src_lang):
        raise UserError(
            f"reverse_ckpt_path={paths[1]} translates {r.src_lang}->{r.tgt_lang}, but ckpt_path={paths[0]} translates "
            f"{f.src_lang}->{f.tgt_lang}: give a checkpoint of the reverse direction, {f.tgt_lang}->{f.src_lang}"
        )
    if forward.model.tokenizer.get_vocab() != reverse.model.tokenizer.get_vocab():
        raise UserError(
            f"{paths[0]} and {paths[1]} have different vocabularies: symmetrize two models trained on the same data "
            "with the same data.vocab_size (their joint BPE is then the same)"
        )


def align_both(cfg: DictConfig, model: Model) -> dict:
    if cfg.symmetrize not in METHODS:
        raise UserError(f"symmetrize={cfg.symmetrize!r}: use one of {', '.join(METHODS)}")
    paths, reverse_path = model.paths, Path(cfg.reverse_ckpt_path)
    forward = Direction(model)
    reverse = Direction(Model.from_checkpoints([reverse_path], model.fabric))
    check_pair(forward, reverse, (paths[0], reverse_path))
    policies = {"forward": forward.policy.to_dict(), "reverse": reverse.policy.to_dict()}
    if cfg.gold_dir:
        return gold(cfg, forward, reverse, policies, paths)

    sentence = str(cfg.sentence)
    forced = model.forced(sentence, None if cfg.reference is None else required_text(cfg.reference, "reference"),
                          **decode_overrides(cfg.decode))
    target = forced if isinstance(forced, str) else model.tokenizer.decode(forced)
    f = forward.links(sentence, forced, target)
    r = reverse.links(target, target, sentence)
    if f is None or r is None:
        raise UserError("the sentence or its translation is longer than a model's positions: give a shorter sentence")
    links = symmetrize(f, flip(r), cfg.symmetrize)
    data = {
        "source": sentence,
        "translation": target,
        "forced": cfg.reference is not None,
        "src_words": sentence.split(),
        "tgt_words": target.split(),
        "policies": policies,
        "symmetrize": cfg.symmetrize,
        "forward_links": sorted(f),
        "reverse_links": sorted(flip(r)),  # as (source word, target word), like the others
        "links": sorted(links),
        "pharaoh": to_pharaoh(links),
    }
    staged = StagedOutput(cfg, paths, "align", kind="alignments")
    with staged as out:
        write_json(out / "alignment.json", data)
    print(target)
    print(data["pharaoh"])
    return {"translation": target, "pharaoh": data["pharaoh"], "output_dir": str(staged.final)}


def flip(links: set[Link]) -> set[Link]:
    """The reverse model's (its source = our target, its target = our source) links, turned round."""
    return {(j, i) for i, j in links}


def gold(cfg: DictConfig, forward: Direction, reverse: Direction, policies: dict, paths: list[Path]) -> dict:
    g = read_gold(Path(cfg.gold_dir), forward.meta.src_lang, forward.meta.tgt_lang)
    hyps: dict[str, list] = {"forward": [], "reverse": []}
    kept = []
    for k, (src, tgt) in enumerate(zip(g.src, g.tgt)):
        f, r = forward.links(src, tgt, tgt), reverse.links(tgt, src, src)
        if f is None or r is None:
            continue
        kept.append(k)
        hyps["forward"].append(f)
        hyps["reverse"].append(flip(r))
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
        print(f"{name}: AER {s['aer']:.3f}, precision {s['precision']:.3f}, recall {s['recall']:.3f} over {len(kept)} pairs")
    return result | {"output_dir": str(staged.final)}
