"""Two models, one for each direction of a language pair, linking the same sentence pair: each
by its default layer and head in its own direction (target→source), as a statistical aligner's
forward and reverse runs do, for qkvmt.alignment.symmetrize to combine (align.py with
reverse_ckpt_path=, and the explorer)."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.alignment.links import Link, hard_links, pair_word_groups
from qkvmt.alignment.policy import AligningModel, AlignmentPolicy, directed_links
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.analysis.forced import forced_attention
from qkvmt.errors import UserError

# Read from the two models' weights themselves, not their argmax links: a link (i, j) where the
# smaller (soft-intersection) or the mean (soft-mean) of the forward model's weight of source
# word i for target word j and the reverse model's of target word j for source word i reaches a
# threshold. Unlike the hard methods, a word may take several links (as awesome-align's
# probability-threshold extraction).
SOFT = {"soft-intersection": np.minimum, "soft-mean": lambda a, b: (a + b) / 2}
TWO_MODEL_METHODS = (*METHODS, *SOFT)
SOFT_THRESHOLD = 0.3  # the soft methods' threshold when symmetrize_threshold is not given
AUTO = "auto"  # symmetrize's default, the method suited to the two models (pair_method); reverse_ckpt_path's too


def checked_method(method: str, threshold: float | None, setting: str = "symmetrize") -> tuple[str, float | None]:
    """A symmetrization of two models (or AUTO) and its threshold (None: not given), or a
    UserError naming the setting."""
    if method not in (*TWO_MODEL_METHODS, AUTO):
        raise UserError(f"{setting}={method!r}: use {AUTO} or one of {', '.join(TWO_MODEL_METHODS)}")
    if threshold is None:
        return method, None
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
        raise UserError(f"{setting}_threshold={threshold!r}: give a weight in (0, 1], the least a soft link needs")
    return method, float(threshold)


class Direction:
    """One model with the policy it links by: by default its own default, target→source (one
    direction of a symmetrized pair)."""

    def __init__(self, model: AligningModel, policy: AlignmentPolicy | None = None):
        self.model, self.meta = model, model.meta
        self.policy = policy or model.default_policy.one_way()

    def matrix(self, source: str, target: str | list[int], target_text: str) -> np.ndarray | None:
        """(target words, source words) weights by the policy; None when the subwords do not
        group into the whitespace words (a pair cut at the model's positions)."""
        m, signal = self.model, self.policy.signal
        sa = forced_attention(
            m.transformer, m.tokenizer, source, target, self.meta.full_context_layer, analyses={signal}
        )
        groups = pair_word_groups(sa.src_tokens, sa.out_tokens, source, target_text)
        return (
            None
            if groups is None
            else self.policy.word_matrix(sa.for_alignment.map("cross", signal), groups[1], groups[0])
        )

    def links(self, source: str, target: str | list[int], target_text: str) -> set[Link] | None:
        """(source word, target word) links; None where `matrix` is."""
        m = self.matrix(source, target, target_text)
        return None if m is None else directed_links(m, self.policy.direction)


@dataclass(frozen=True)
class TwoWay:
    """One sentence pair as two models read it, each in its own direction (target→source)."""

    forward: np.ndarray  # (target words, source words): the forward model's weights
    reverse: np.ndarray  # (source words, target words): the reverse model's, its target our source

    @property
    def forward_links(self) -> set[Link]:
        return hard_links(self.forward)

    @property
    def reverse_links(self) -> set[Link]:
        """The reverse model's links, as (source word, target word)."""
        return flip(hard_links(self.reverse))

    def links(self, method: str = "grow-diag-final-and", threshold: float = SOFT_THRESHOLD) -> set[Link]:
        """(source word, target word) links by `method` (TWO_MODEL_METHODS); `threshold` for SOFT."""
        if method in SOFT:
            both = SOFT[method](self.forward, self.reverse.T)  # (target words, source words)
            return {(int(i), int(j)) for j, i in zip(*np.nonzero(both >= threshold))}
        return symmetrize(self.forward_links, self.reverse_links, method)


def check_unpaired(method: str, threshold: float | None, how: str, give: str) -> None:
    """symmetrize= and symmetrize_threshold= (as checked_method gave them) where one model links,
    `how` saying why: given rather than left to AUTO, they could not take effect, a UserError
    saying to `give` a partner or drop them."""
    if method == AUTO and threshold is None:
        return
    name, value = ("symmetrize", method) if method != AUTO else ("symmetrize_threshold", f"{threshold:g}")
    raise UserError(
        f"{name}={value} combines the links of two models, and this links with one{how}: give {give}, or drop {name}="
    )


def reads_supervised_head(direction: "Direction") -> bool:
    """Whether a direction reads a supervised head's weights as the head was taught to link:
    its own layer and head (a pair's default), the steps predicting each word."""
    p = direction.policy
    return bool(direction.meta.alignment) and p.signal == "weights" and p.rows == "predicting"


def pair_method(
    method: str, threshold: float | None, forward: "Direction", reverse: "Direction", scores_all: bool = False
) -> tuple[str, float]:
    """`method` and its threshold for two models, as checked_method gave them. AUTO becomes
    soft-mean where both read a supervised head's weights, grow-diag-final-and otherwise. Why:
    a supervised head's weights are peaked, and on RWTH's first 100 pairs their mean at 0.3 beat
    grow-diag-final-and for both supervised pairs measured; plain attention's weights are
    spread, so that mean reaches 0.3 on almost no link (docs/results.md, "Word alignment").
    A threshold given beside a hard method could not take effect: a UserError, unless
    `scores_all` (a gold set scores every soft method at it too)."""
    if method == AUTO:
        both = reads_supervised_head(forward) and reads_supervised_head(reverse)
        method = "soft-mean" if both else "grow-diag-final-and"
        why = f"symmetrize={AUTO} chose {method} for these two models"
    else:
        why = f"symmetrize={method}"
    if threshold is not None and method not in SOFT and not scores_all:
        raise UserError(
            f"symmetrize_threshold={threshold:g} is read by the soft methods only, and {why}: drop it, or give "
            "symmetrize=soft-mean or soft-intersection"
        )
    return method, SOFT_THRESHOLD if threshold is None else threshold


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
) -> TwoWay | None:
    """The forward model's reading of (source, target) and the reverse model's of (target,
    source); None where either pair does not group into its words. `target`: text, or the ids
    the forward model generated (forced exactly as produced)."""
    f = forward.matrix(source, target, target_text)
    r = reverse.matrix(target_text, source, source)
    return None if f is None or r is None else TwoWay(f, r)
