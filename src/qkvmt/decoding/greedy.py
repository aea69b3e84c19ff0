"""Greedy search over the incremental decoder: each row's best next token, step after step, on the
eager step or a compiled one (qkvmt.decoding.compiled), both running `greedy_step`."""

import torch
from torch import Tensor

from qkvmt.decoding.finished import Hypothesis, until_end
from qkvmt.decoding.search import DecodeConfig
from qkvmt.decoding.step_view import at, sentences_searched
from qkvmt.decoding.stepper import Stepper, max_lengths
from qkvmt.model.transformer import Transformer


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, cfg: DecodeConfig, compiled=None) -> list[Hypothesis]:
    """Greedy search; `compiled`: greedy_step compiled (qkvmt.decoding.compiled), which then runs each step."""
    c = model.cfg
    memory, src_mask, _ = model.encode(src)
    limit = max_lengths(src_mask.flatten(1).sum(-1), cfg, c.max_positions)
    max_t = int(limit.max())
    step = Stepper(model, memory, src_mask, limit, cfg, max_t if compiled else None)
    b = src.size(0)
    prefix = torch.full((b, 1), c.bos_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(b, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    sentence_of = sentences_searched(b, src.device)
    for t in range(max_t):
        at(sentence_of, 1, t, prefix)
        prefix = (compiled if compiled is not None and t else greedy_step)(
            step, prefix, scores, done, limit, c.pad_id, c.eos_id
        )
        if done.all():
            break
    return [Hypothesis(until_end(row, c.eos_id, c.pad_id), float(s)) for row, s in zip(prefix[:, 1:].tolist(), scores)]


def greedy_step(step: Stepper, prefix: Tensor, scores: Tensor, done: Tensor, limit: Tensor, pad_id: int, eos_id: int):
    """A step of greedy search: the best token of each row (pad once the row is done) appended to
    `prefix`, its log-probability added to `scores` and `done` updated (those two in place)."""
    best, token = step(prefix).max(dim=-1)
    token = token.masked_fill(done, pad_id)
    scores += best.masked_fill(done, 0.0)
    prefix = torch.cat([prefix, token[:, None]], dim=1)
    done |= (token == eos_id) | (prefix.size(1) > limit)  # a row ends at </s> or its limit
    return prefix
