"""Model inputs from subword ids: the one place that cuts, adds <s>/</s> and pads, and the
token-budget batches that group sentences for it (training's sampler, translation, alignment and
the studies' passes all batch with them).

Training batches, translation, forced attention and the Q/K/V inspector all build their
tensors here, so a sentence reaches the model the same way whichever path it takes:

    src     = x_1 .. x_n </s>
    tgt_in  = <s> y_1 .. y_m      what the decoder reads
    tgt_out = y_1 .. y_m </s>     what each decoder position predicts

Row t of the decoder's (and the cross-attention's) weights is the query at tgt_in[t], so it
predicts tgt_out[t]; pages label decoder rows with tgt_out (qkvmt.results.sentence_attention).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from qkvmt.text.tokenizer import Specials


@dataclass
class Inputs:
    src: Tensor  # (B, S) x </s>, padded
    tgt_in: Tensor | None = None  # (B, T) <s> y, padded
    tgt_out: Tensor | None = None  # (B, T) y </s>, padded


def fits(n_ids: int, max_len: int | None) -> bool:
    """Whether a sentence of n_ids subwords fits max_len positions with its </s> (or <s>)."""
    return max_len is None or n_ids + 1 <= max_len


def token_budget_batches(lengths: np.ndarray, max_tokens: int, order: np.ndarray) -> list[np.ndarray]:
    """Cut `order` (indices sorted by length) into batches whose padded size fits max_tokens."""
    batches, start, longest = [], 0, 0
    for pos, i in enumerate(order):
        longest_new = max(longest, int(lengths[i]))
        if pos > start and (pos - start + 1) * longest_new > max_tokens:
            batches.append(order[start:pos])
            start, longest_new = pos, int(lengths[i])
        longest = longest_new
    if start < len(order):
        batches.append(order[start:])
    return batches


def build_inputs(
    src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]] | None, specials: Specials, max_len: int | None = None
) -> Inputs:
    """Padded tensors of a batch of id rows (no special tokens in them). A row longer than
    max_len - 1 is cut to fit; callers that must not cut silently check `fits` first."""
    keep = None if max_len is None else max_len - 1
    src_rows = [np.asarray(r[:keep], dtype=np.int64) for r in src]
    out = Inputs(src=_laid_out(src_rows, specials.pad, specials.eos, first=False))
    if tgt is not None:
        tgt_rows = [np.asarray(r[:keep], dtype=np.int64) for r in tgt]
        out.tgt_in = _laid_out(tgt_rows, specials.pad, specials.bos, first=True)
        out.tgt_out = _laid_out(tgt_rows, specials.pad, specials.eos, first=False)
    return out


def _laid_out(rows: list[np.ndarray], pad_id: int, special: int, first: bool) -> Tensor:
    """(B, longest + 1) int64: each row with `special` before it (first) or after it, then pads.
    Built in whole arrays, not token by token: a training batch holds thousands of tokens, and
    the host builds one every step."""
    lengths = np.array([len(r) for r in rows], dtype=np.int64)  # (B,)
    width = int(lengths.max(initial=0)) + 1
    out = np.full((len(rows), width), pad_id, dtype=np.int64)  # (B, width)
    column, shift = np.arange(width), int(first)
    body = (column >= shift) & (column < lengths[:, None] + shift)  # (B, width): the ids' places, row by row
    out[body] = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if first:
        out[:, 0] = special
    else:
        out[np.arange(len(rows)), lengths] = special
    return torch.from_numpy(out)
