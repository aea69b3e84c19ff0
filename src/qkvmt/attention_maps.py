"""Attention of every layer and head for given sentence pairs, by forced decoding.

A translation's attention is that of a teacher-forced pass over the ids decoding generated: the
decoder is causal, so forcing them reproduces the states the search went through. Forcing a
reference instead (align.py's `reference=`) is how alignments are evaluated against gold.

Row t of the decoder's weights belongs to the query at input position t, which sees
`<s> y_1 .. y_t` and predicts y_{t+1} (the last row predicts `</s>`).
"""

from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer

from qkvmt.model import Transformer


@dataclass
class SentenceAttention:
    src_tokens: list[str]  # x_1 .. x_n </s>
    tgt_tokens: list[str]  # <s> y_1 .. y_m: what the decoder saw
    out_tokens: list[str]  # y_1 .. y_m </s>: what each decoder row predicts
    encoder: np.ndarray  # (L_enc, H, S, S)
    decoder: np.ndarray  # (L_dec, H, T, T)
    cross: np.ndarray  # (L_dec, H, T, S)


def token_ids(tokenizer: Tokenizer, text: str | list[int], max_positions: int) -> list[int]:
    """Subword ids of a text (whitespace runs collapsed, so each space-separated word is one word
    group), or ids as given (a generated hypothesis), cut to fit the model's positions."""
    ids = text if isinstance(text, list) else tokenizer.encode(" ".join(text.split()), add_special_tokens=False).ids
    return ids[: max_positions - 1]


def token_names(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    return [tokenizer.id_to_token(i) for i in ids]


@torch.no_grad()
def forced_attention(
    model: Transformer, tokenizer: Tokenizer, source: str, target: str | list[int], full_context_layer: int | None = None
) -> SentenceAttention:
    """Weights of one (source, target) pair. The target is text (tokenized with the model's own
    BPE) or the ids decoding generated, so a hypothesis is forced exactly as it was produced.
    full_context_layer: that decoder layer's cross-attention comes from a pass without the
    causal mask instead, as a head supervised with full context was trained to be read."""
    c = model.cfg
    device = next(model.parameters()).device
    src = token_ids(tokenizer, source, c.max_positions) + [c.eos_id]
    tgt = token_ids(tokenizer, target, c.max_positions)
    src_t = torch.tensor([src], device=device)
    tgt_t = torch.tensor([[c.bos_id] + tgt], device=device)
    _, att = model(src_t, tgt_t, need_weights=True)
    if full_context_layer is not None:
        memory, src_mask, _ = model.encode(src_t)
        att.cross[full_context_layer] = model.full_context_cross(tgt_t, memory, src_mask, full_context_layer)

    def stack(ws):  # per-layer (1, H, Tq, Tk) -> (L, H, Tq, Tk)
        return torch.stack([w[0] for w in ws]).float().cpu().numpy()

    return SentenceAttention(
        src_tokens=token_names(tokenizer, src),
        tgt_tokens=token_names(tokenizer, [c.bos_id] + tgt),
        out_tokens=token_names(tokenizer, tgt + [c.eos_id]),
        encoder=stack(att.encoder),
        decoder=stack(att.decoder),
        cross=stack(att.cross),
    )
