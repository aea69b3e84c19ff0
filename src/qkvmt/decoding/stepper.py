"""A search's next-token scores: the decoder's step (Stepper) and the rules every search applies to
its log-probabilities (Rules), apart, so that a search whose rows come from several searches' shared
pass (qkvmt.decoding.running) applies each one's rules to its own rows."""

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer

if TYPE_CHECKING:
    from qkvmt.decoding.search import DecodeConfig


class Rules:
    """What a search allows at each step, for rows within length limits: the log-probabilities of a
    step's logits with the bans, the forced first token, min_len and the length limit applied."""

    def __init__(self, c: ModelConfig, limit: Tensor, cfg: "DecodeConfig"):
        self.eos_id = c.eos_id
        self.limit = limit  # (N,) output tokens allowed per row, EOS included
        self.first_limit = int(limit.min()) if limit.numel() else 0  # before it, no row is at its limit
        self.min_len = cfg.min_len
        self.forced_first, self.free_eos = cfg.forced_first_id, cfg.free_eos_at_limit
        self.cut, self.renormalize = cfg.cut_at_limit, cfg.renormalize
        self.banned = torch.tensor(c.banned_ids, device=limit.device)

    def scored(self, logits: Tensor, n_out: int | Tensor) -> Tensor:
        """logits (N, V) of rows that would be n_out tokens long if this step ended them (n_out (N,): each
        row's own, where they differ) -> log-probabilities (N, V), float32.

        One fused log_softmax over the vocabulary: on a CPU it costs half of a logsumexp, which
        reads the row four times. <pad> and <s> never appear inside an output
        (ModelConfig.banned_ids); forced_first_id, where set, is the only first token; EOS waits
        for min_len; a row at its length limit can only end (EOS keeps its own probability, so
        scores stay comparable, or costs nothing with free_eos_at_limit), or with cut_at_limit
        chooses as at any step and the search ends it there. With renormalize, the scores left
        are normalised again (what the bans and forced tokens took is shared out).
        """
        eos_id = self.eos_id
        logp = logits.float().log_softmax(dim=-1)
        logp.index_fill_(1, self.banned, float("-inf"))
        per_row = isinstance(n_out, Tensor)
        if self.forced_first is not None and (per_row or n_out == 1):  # only the forced token, at log-probability 0
            forced = torch.full_like(logp, float("-inf"))
            forced[:, self.forced_first] = 0.0
            logp = torch.where((n_out == 1)[:, None], forced, logp) if per_row else forced
        # A compiled step takes every branch that depends on the step, so one graph serves all of them, as
        # do rows each at its own step.
        branch_free = torch.compiler.is_compiling() or per_row
        near_limit = not self.cut and (branch_free or n_out >= self.first_limit)
        if near_limit:
            eos = torch.zeros_like(logp[:, 0]) if self.free_eos else logp[:, eos_id].clone()
        if branch_free:
            too_short = (n_out if per_row else torch.full((), n_out, device=logp.device)) < self.min_len
            logp[:, eos_id] = logp[:, eos_id].masked_fill(too_short, float("-inf"))
        elif n_out < self.min_len:
            logp[:, eos_id] = float("-inf")
        if near_limit:  # the length limit wins over min_len
            at_limit = n_out >= self.limit  # (N,)
            logp.masked_fill_(at_limit[:, None], float("-inf"))
            logp[:, eos_id] = torch.where(at_limit, eos, logp[:, eos_id])
        return logp.log_softmax(dim=-1) if self.renormalize else logp

    def reorder_beams(self, index: Tensor) -> None:
        """Row i continues row index[i], a beam of the same sentence (the number of rows may
        grow, as after the first step, or shrink, as sentences leave)."""
        self.limit = self.limit.index_select(0, index)


class Stepper(Rules):
    """Next-token scores, with or without the KV cache, within length limits."""

    def __init__(
        self,
        model: Transformer,
        memory: Tensor,
        src_mask: Tensor,
        limit: Tensor,
        cfg: "DecodeConfig",
        length: int | None = None,
    ):
        super().__init__(model.cfg, limit, cfg)
        self.model, self.memory, self.src_mask = model, memory, src_mask
        # length: the positions the KV cache makes room for at once (a compiled step's: one more, so no
        # step fills it, which would take a graph of its own), else it grows
        self.state = None if not cfg.use_cache else model.new_state() if length is None else model.new_state(length + 1)

    def __call__(self, prefix: Tensor) -> Tensor:
        """prefix: (N, t + 1) BOS and the t tokens so far -> log-probabilities (N, V), float32 (Rules.scored)."""
        ids = prefix[:, -1:] if self.state is not None else prefix
        logits, _, _ = self.model.decode(ids, self.memory, self.src_mask, self.state, last_only=True)
        return self.scored(logits[:, -1], prefix.size(1))

    def reorder_beams(self, index: Tensor) -> None:
        """As Rules', and the cache's rows with them; the source and its mask are shared by a
        sentence's beams and stay."""
        super().reorder_beams(index)
        if self.state is not None:
            self.state.reorder_beams(index)

    def keep_sentences(self, index: Tensor) -> None:
        """Only sentences `index` go on: their sources, masks and cross-attention caches stay
        (their beams' rows move with reorder_beams)."""
        self.memory, self.src_mask = self.memory.index_select(0, index), self.src_mask.index_select(0, index)
        if self.state is not None:
            self.state.keep_sentences(index)


def max_lengths(src_len: Tensor, cfg: "DecodeConfig", max_positions: int) -> Tensor:
    """(B,) number of output tokens allowed, EOS included, within the model's positions, for
    source rows of src_len tokens (</s> included)."""
    limit = cfg.max_len_a * src_len.float() + cfg.max_len_b
    return limit.clamp(1, max_positions - 1).long()  # clamped first: a huge float cast to long wraps negative
