"""Model inputs from subword ids: the one place that cuts, adds <s>/</s> and pads.

Training batches, translation, forced attention and the Q/K/V inspector all build their
tensors here, so a sentence reaches the model the same way whichever path it takes:

    src     = x_1 .. x_n </s>
    tgt_in  = <s> y_1 .. y_m      what the decoder reads
    tgt_out = y_1 .. y_m </s>     what each decoder position predicts

Row t of the decoder's (and the cross-attention's) weights is the query at tgt_in[t], so it
predicts tgt_out[t]; pages label decoder rows with tgt_out (qkvmt.views.sentence_attention).
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


def build_inputs(
    src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]] | None, specials: Specials, max_len: int | None = None
) -> Inputs:
    """Padded tensors of a batch of id rows (no special tokens in them). A row longer than
    max_len - 1 is cut to fit; callers that must not cut silently check `fits` first."""
    cut = (lambda r: r) if max_len is None else (lambda r: r[: max_len - 1])
    src = [cut(r) for r in src]
    out = Inputs(src=_pad([list(r) + [specials.eos] for r in src], specials.pad))
    if tgt is not None:
        tgt = [list(cut(r)) for r in tgt]
        out.tgt_in = _pad([[specials.bos] + r for r in tgt], specials.pad)
        out.tgt_out = _pad([r + [specials.eos] for r in tgt], specials.pad)
    return out


def _pad(rows: list[list[int]], pad_id: int) -> Tensor:
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.from_numpy(np.asarray(r, dtype=np.int64))
    return out
