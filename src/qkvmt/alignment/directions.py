"""Two models, one for each direction of a language pair, linking the same sentence pair: each
by its default layer and head in its own direction (target→source), as a statistical aligner's
forward and reverse runs do, for qkvmt.alignment.symmetrize to combine (align.py with
reverse_ckpt_path=, and the explorer)."""

from pathlib import Path

from qkvmt.alignment.links import Link, pair_word_groups
from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.analysis.forced import forced_attention
from qkvmt.errors import UserError


class Direction:
    """One model (a qkvmt.api.Model: its transformer, tokenizer, meta and default_policy) with
    the policy it links by: by default its own default, target→source (one direction of a
    symmetrized pair)."""

    def __init__(self, model, policy: AlignmentPolicy | None = None):
        self.model, self.meta = model, model.meta
        self.policy = policy or model.default_policy.one_way()

    def links(self, source: str, target: str | list[int], target_text: str) -> set[Link] | None:
        """(source word, target word) links; None when the subwords do not group into the
        whitespace words (a pair cut at the model's positions)."""
        m, signal = self.model, self.policy.signal
        sa = forced_attention(
            m.transformer, m.tokenizer, source, target, self.meta.full_context_layer, analyses={signal}
        )
        groups = pair_word_groups(sa.src_tokens, sa.out_tokens, source, target_text)
        return (
            None if groups is None else self.policy.links(sa.for_alignment.map("cross", signal), groups[1], groups[0])
        )


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


def flip(links: set[Link]) -> set[Link]:
    """The reverse model's (its source = our target, its target = our source) links, turned round."""
    return {(j, i) for i, j in links}


def both_ways(
    forward: Direction, reverse: Direction, source: str, target: str | list[int], target_text: str
) -> tuple[set[Link], set[Link]] | None:
    """The forward model's links of (source, target) and the reverse model's of (target, source),
    both as (source word, target word); None where either pair does not group into its words.
    `target`: text, or the ids the forward model generated (forced exactly as produced)."""
    f = forward.links(source, target, target_text)
    r = reverse.links(target_text, source, source)
    return None if f is None or r is None else (f, flip(r))
