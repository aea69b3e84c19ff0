"""Word links of many sentence pairs at once (`qkvmt align src_file= tgt_file=`): batched forced
passes that run the model only up to the policy's decoder layer, then each pair's links taken by
the policy's own code, so a pair gets exactly the links `Model.align` gives it alone.

Why the links agree with the one-sentence path (qkvmt.analysis.forced.forced_attention):

* every layer that runs takes the explicit attention path (need_weights), as a trace does, so
  the numbers are computed the same way, not by the fused kernel;
* padding changes nothing a pair reads: source pads are masked keys (weight 0), target pads
  come after the real tokens, which the causal mask (or, for a full-context reading, the
  target's padding mask) keeps them from seeing; each pair's rows and columns are cut back out;
* a checkpoint whose supervised head was trained with full context
  (CheckpointMeta.full_context_layer) is read at that layer without the causal mask, as
  ForcedPass.for_alignment reads it, by the decoder's own self_mask (the mask the trace's edit
  writes, made by the same Transformer.target_mask);
* the reduction to words and the links are AlignmentPolicy.word_matrix and directed_links,
  and with two models qkvmt.alignment.symmetrize, as align_both uses them.

A pair's ids, tokens and word groups are those of pair_word_groups: a pair that does not fit the
model's positions, or whose subwords do not group into its whitespace words, gets no links (a
reason instead), never links to the wrong words.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from qkvmt.alignment.directions import SOFT_THRESHOLD, TwoWay
from qkvmt.alignment.links import Link, pair_word_groups
from qkvmt.alignment.policy import AligningModel, AlignmentPolicy, directed_links
from qkvmt.analysis.forced import AttentionMap, target_names, token_names
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs, fits, token_budget_batches
from qkvmt.text.tokenizer import encode, encode_target

# Why a pair gets an empty line instead of links.
EMPTY = "empty"  # a side is empty
TOO_LONG = "too_long"  # a side has more subwords than the model's positions take
UNGROUPED = "ungrouped"  # the subwords do not group into the whitespace words (a typed "▁" is a word of its own)
REASONS = (EMPTY, TOO_LONG, UNGROUPED)


@dataclass(frozen=True)
class Prepared:
    """One pair as one model reads it."""

    src: list[int]  # subword ids, no specials
    tgt: list[int]
    src_tokens: list[str]  # x_1 .. x_n </s>: the cross-attention's columns
    out_tokens: list[str]  # y_1 .. y_m </s>: its rows, each named by what its step predicts
    src_groups: list[list[int]]  # each source word's positions in src_tokens
    tgt_groups: list[list[int]]

    @property
    def size(self) -> int:
        """The tokens of both sides the pass holds, with </s> and <s>."""
        return len(self.src) + len(self.tgt) + 2


class LayerReader:
    """One model's links by one policy, from batched passes that stop at the policy's layer.

    Only the attention weights are read: the other signals are computed from one sentence's
    trace (batch row 0)."""

    def __init__(self, model: AligningModel, policy: AlignmentPolicy):
        if policy.signal != "weights":
            raise UserError(
                f"alignment.signal={policy.signal}: src_file= aligns a corpus by attention weights only; "
                "use alignment.signal=weights, or sentence= for one pair by another signal"
            )
        self.transformer, self.tokenizer, self.policy = model.transformer, model.tokenizer, policy
        self.full_context = model.meta.full_context_layer is not None and (
            model.meta.full_context_layer % model.transformer.cfg.decoder_layers == policy.layer
        )
        # The batch holds only the policy's layer, its index 0 there (layer_weights).
        self.reading = replace(policy, layer=0)

    def prepared(self, sources: list[str], targets: list[str]) -> list[Prepared | str]:
        """Each nonempty pair as this model reads it, or the reason it cannot be linked."""
        c, eos = self.transformer.cfg, self.transformer.cfg.eos_id
        out: list[Prepared | str] = []
        for source, target, src, tgt in zip(
            sources, targets, encode(self.tokenizer, sources), encode_target(self.tokenizer, targets)
        ):
            if not (fits(len(src), c.max_positions) and fits(len(tgt), c.max_positions)):
                out.append(TOO_LONG)
                continue
            src_tokens = token_names(self.tokenizer, [*src, eos])
            out_tokens = target_names(self.tokenizer, [*tgt, eos])
            groups = pair_word_groups(src_tokens, out_tokens, source, target)
            out.append(UNGROUPED if groups is None else Prepared(src, tgt, src_tokens, out_tokens, *groups))
        return out

    @torch.no_grad()
    def layer_weights(self, batch: list[Prepared]) -> np.ndarray:
        """(B, H, T, S) cross-attention weights of the policy's layer for a batch of pairs."""
        model = self.transformer
        device = next(model.parameters()).device
        x = build_inputs([p.src for p in batch], [p.tgt for p in batch], model.cfg.specials, model.cfg.max_positions)
        src, tgt_in = x.src.to(device), x.tgt_in.to(device)  # (B, S), (B, T)
        memory, src_mask, _ = model.encode(src, need_weights=True)  # explicit path, as a trace runs it
        self_mask = model.target_mask(tgt_in) if self.full_context else None  # (B, 1, 1, T)
        _, _, cross = model.decode(
            tgt_in, memory, src_mask, need_weights=True, project=False, self_mask=self_mask, depth=self.policy.layer + 1
        )  # the layers after the policy's, and the output layer, are never run: nothing reads them
        return cross[self.policy.layer].float().cpu().numpy()  # (B, H, T, S)

    def matrices(self, batch: list[Prepared]) -> list[np.ndarray]:
        """The (target words, source words) weights of each pair of the batch, by the policy."""
        weights = self.layer_weights(batch)  # (B, H, T, S)
        out = []
        for w, p in zip(weights, batch):
            # This pair's rows and columns, contiguous as the one-sentence path holds them: (1, H, T_p, S_p)
            own = np.ascontiguousarray(w[None, :, : len(p.out_tokens), : len(p.src_tokens)])
            cross = AttentionMap("cross", own, p.out_tokens, p.src_tokens)
            out.append(self.reading.word_matrix(cross, p.tgt_groups, p.src_groups))
        return out

    def links(self, batch: list[Prepared]) -> list[set[Link]]:
        """The links of each pair of the batch, as (source word, target word)."""
        return [directed_links(m, self.reading.direction) for m in self.matrices(batch)]


def corpus_links(
    sources: list[str],
    targets: list[str],
    forward: LayerReader,
    reverse: LayerReader | None = None,
    symmetrization: str = "grow-diag-final-and",
    threshold: float = SOFT_THRESHOLD,
    max_tokens: int = 16384,
    done: Callable[[int], object] = lambda n: None,
) -> list[set[Link] | str]:
    """Each pair's links (source word, target word), in input order, or the reason it has none
    (REASONS). With `reverse`, a model of the other direction reading (target, source): the two
    readings are symmetrized (qkvmt.alignment.directions.TwoWay; `threshold` for a soft method),
    as align_both does.

    Pairs are sorted by length and cut into batches of at most max_tokens padded tokens (both
    sides together), so little of a pass is padding. done(n) is called as n more pairs are done."""
    links: list[set[Link] | str] = [EMPTY] * len(sources)
    todo = [i for i, (s, t) in enumerate(zip(sources, targets)) if s.strip() and t.strip()]
    readers = [(forward, sources, targets)] + ([(reverse, targets, sources)] if reverse else [])
    # One list per reader, each over `todo`'s pairs.
    prepared = [r.prepared([a[i] for i in todo], [b[i] for i in todo]) for r, a, b in readers]
    ready, sizes = [], []
    for k, i in enumerate(todo):
        own = [p[k] for p in prepared]
        reason = next((p for p in own if isinstance(p, str)), None)
        if reason is not None:
            links[i] = reason
        else:
            ready.append(k)
            sizes.append(max(p.size for p in own))
    done(len(sources) - len(ready))
    sizes = np.array(sizes, dtype=np.int64)
    order = np.argsort(sizes, kind="stable")  # positions in `ready`
    for batch in token_budget_batches(sizes, max_tokens, order):
        if reverse is None:
            found = forward.links([prepared[0][ready[b]] for b in batch])
        else:
            f, r = ([p[ready[b]] for b in batch] for p in prepared)
            found = [
                TwoWay(*two).links(symmetrization, threshold) for two in zip(forward.matrices(f), reverse.matrices(r))
            ]
        for one, b in zip(found, batch):
            links[todo[ready[b]]] = one
        done(len(batch))
    return links
