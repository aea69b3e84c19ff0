"""Greedy and batched beam search over the incremental decoder.

Each step feeds only the newest token: decoder self-attention keys and values are cached per
layer, and cross-attention keys and values are computed once per source sentence. With
`use_cache=False` every step re-runs the whole prefix instead (the reference the cached path
is tested against, and benchmarked against).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from qkvmt.errors import UserError
from qkvmt.model import Transformer


@dataclass
class DecodeConfig:
    beam_size: int = 5
    max_len_a: float = 1.5  # output length limit: a * source length + b tokens
    max_len_b: int = 10
    len_penalty: float = 1.0  # alpha; 0 ranks finished hypotheses by raw log-probability
    len_penalty_style: str = "fairseq"  # fairseq: score / len^a; gnmt: score / ((5 + len) / 6)^a
    use_cache: bool = True
    max_tokens: int = 4096  # source tokens per batch (each sentence decodes beam_size rows)

    def __post_init__(self):
        if self.beam_size < 1:
            raise UserError(f"decode.beam_size must be at least 1, got {self.beam_size}")
        if self.len_penalty_style not in ("fairseq", "gnmt"):
            raise UserError(f"decode.len_penalty_style must be 'fairseq' or 'gnmt', got {self.len_penalty_style!r}")


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-normalised log-probability (beam) or the sum of log-probabilities (greedy)


def length_penalty(length: Tensor, cfg: DecodeConfig) -> Tensor:
    if cfg.len_penalty_style == "gnmt":
        return ((5.0 + length) / 6.0) ** cfg.len_penalty
    return length.float() ** cfg.len_penalty


class Stepper:
    """Log-probabilities of the next token, with or without the KV cache."""

    def __init__(self, model: Transformer, memory: Tensor, src_mask: Tensor, use_cache: bool):
        self.model, self.memory, self.src_mask = model, memory, src_mask
        self.state = model.new_state() if use_cache else None

    def __call__(self, prefix: Tensor) -> Tensor:
        """prefix: (N, t) every token so far, BOS first -> (N, V) log-probabilities (float32).

        <pad> and <s> never appear inside an output, so they get -inf.
        """
        ids = prefix[:, -1:] if self.state is not None else prefix
        logits, _, _ = self.model.decode(ids, self.memory, self.src_mask, self.state)
        logp = logits[:, -1].float().log_softmax(dim=-1)
        logp[:, [self.model.cfg.pad_id, self.model.cfg.bos_id]] = float("-inf")
        return logp

    def reorder(self, index: Tensor) -> None:
        self.memory = self.memory.index_select(0, index)
        self.src_mask = self.src_mask.index_select(0, index)
        if self.state is not None:
            self.state.reorder(index)


def max_lengths(src_mask: Tensor, cfg: DecodeConfig, max_positions: int) -> Tensor:
    """(B,) number of output tokens allowed, EOS included, within the model's positions."""
    src_len = src_mask.flatten(1).sum(-1)
    limit = (cfg.max_len_a * src_len.float() + cfg.max_len_b).long()
    return limit.clamp(1, max_positions - 1)


@torch.no_grad()
def greedy_search(model: Transformer, src: Tensor, cfg: DecodeConfig) -> list[Hypothesis]:
    c = model.cfg
    memory, src_mask, _ = model.encode(src)
    step = Stepper(model, memory, src_mask, cfg.use_cache)
    limit = max_lengths(src_mask, cfg, c.max_positions)
    b = src.size(0)
    prefix = torch.full((b, 1), c.bos_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(b, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for t in range(int(limit.max())):
        logp = step(prefix)
        logp[t + 1 >= limit, : c.eos_id] = float("-inf")  # out of length: only EOS is left
        logp[t + 1 >= limit, c.eos_id + 1 :] = float("-inf")
        best, token = logp.max(dim=-1)
        token = token.masked_fill(done, c.pad_id)
        scores += best.masked_fill(done, 0.0)
        prefix = torch.cat([prefix, token[:, None]], dim=1)
        done |= token == c.eos_id
        if done.all():
            break
    return [Hypothesis(_strip(row, c.eos_id, c.pad_id), float(s)) for row, s in zip(prefix[:, 1:].tolist(), scores)]


@torch.no_grad()
def beam_search(model: Transformer, src: Tensor, cfg: DecodeConfig) -> list[Hypothesis]:
    """Batched beam search: B sentences × K beams advance together as B*K decoder rows.

    Each step takes the top 2K continuations per sentence, so K continue even if some end in
    EOS. Finished hypotheses are ranked by length-normalised score; a sentence stops once it
    has K of them, or when it reaches its length limit.
    """
    c, k = model.cfg, cfg.beam_size
    b, dev = src.size(0), src.device
    memory, src_mask, _ = model.encode(src)
    rows = torch.arange(b, device=dev).repeat_interleave(k)
    step = Stepper(model, memory.index_select(0, rows), src_mask.index_select(0, rows), cfg.use_cache)
    limit = max_lengths(src_mask, cfg, c.max_positions)  # (B,)
    prefix = torch.full((b * k, 1), c.bos_id, dtype=torch.long, device=dev)
    scores = torch.full((b, k), float("-inf"), device=dev)
    scores[:, 0] = 0.0  # all beams start identical: let only the first one expand
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    active = torch.ones(b, dtype=torch.bool, device=dev)
    for t in range(int(limit.max())):
        logp = step(prefix)  # (B*K, V)
        v = logp.size(-1)
        at_limit = (t + 1 >= limit).repeat_interleave(k)
        eos_only = torch.full_like(logp, float("-inf"))
        eos_only[:, c.eos_id] = logp[:, c.eos_id]
        logp = torch.where(at_limit[:, None], eos_only, logp)
        cand = (scores[:, :, None] + logp.view(b, k, v)).view(b, k * v)
        top_scores, top_ids = cand.topk(2 * k, dim=-1)  # (B, 2K)
        beam, token = top_ids // v, top_ids % v
        is_eos = (token == c.eos_id) & torch.isfinite(top_scores)

        # Finalise EOS candidates that rank among the top K of their sentence (host-side lists).
        take = is_eos & (torch.arange(2 * k, device=dev) < k) & active[:, None]
        if take.any():
            lengths = torch.full_like(top_scores, t + 1)
            norm = top_scores / length_penalty(lengths, cfg)
            for i, j in take.nonzero().tolist():
                if len(finished[i]) < k:
                    row = i * k + beam[i, j].item()
                    finished[i].append(Hypothesis(prefix[row, 1:].tolist(), float(norm[i, j])))
        active &= torch.tensor([len(f) < k for f in finished], device=dev) & (t + 1 < limit)
        if not active.any():
            break

        # Continue with the best K non-EOS candidates of each sentence.
        cont_scores = top_scores.masked_fill(is_eos, float("-inf"))
        keep_scores, keep = cont_scores.topk(k, dim=-1)  # (B, K)
        src_rows = (torch.arange(b, device=dev)[:, None] * k + beam.gather(1, keep)).view(-1)
        scores = keep_scores.masked_fill(~active[:, None], float("-inf"))
        prefix = torch.cat([prefix.index_select(0, src_rows), token.gather(1, keep).view(-1, 1)], dim=1)
        step.reorder(src_rows)
    return [max(f, key=lambda h: h.score) if f else Hypothesis([], float("-inf")) for f in finished]


def generate(model: Transformer, src: Tensor, cfg: DecodeConfig) -> list[Hypothesis]:
    """One hypothesis per source row: greedy for beam_size 1, beam search otherwise."""
    return greedy_search(model, src, cfg) if cfg.beam_size == 1 else beam_search(model, src, cfg)


def _strip(tokens: list[int], eos: int, pad: int) -> list[int]:
    out = []
    for tok in tokens:
        if tok in (eos, pad):
            break
        out.append(tok)
    return out
