"""The sentences of a study and the passes over them: each sentence translated and aligned once,
then, batch by batch, one search and one forced pass per edit, every sentence of a batch edited
at its own words (qkvmt.studies.kv.row_edits).

The forced pass runs over the original translation, with and without the edit, so that the two
are compared row for row: each original token's log-probability, and the cross-attention of
the rows that wrote the translation of the sentence's first word (A), heads and rows averaged.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.trace import Where, edited
from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.inputs import build_inputs, fits, token_budget_batches
from qkvmt.model.transformer import WeightRequest
from qkvmt.studies.kv.words import Word, first_pair, translated_words
from qkvmt.text.tokenizer import decode, encode


@dataclass(frozen=True)
class Sentence:
    """A sentence of the study: its translation and the two words an edit moves."""

    line: int  # 0-based line of the split
    source: str
    src_ids: list[int]
    original: list[int]  # the model's translation, subword ids without </s>
    translation: str
    a: Word
    b: Word


def aligned(model, source: str, ids: list[int]):
    """Model.align's word alignment (its policy's WordAlignment, whose links SentenceAlignment
    shows), read from a forced pass over the subwords the model generated (the text would be
    tokenized again, and need not give the same subwords)."""
    policy = model.default_policy
    attention = forced_attention(
        model.transformer, model.tokenizer, source, ids, model.meta.full_context_layer, analyses={policy.signal}
    )
    return policy.align_words(attention)


def study_sentences(model, lines: list[str], n: int, cfg: DecodeConfig) -> tuple[list[Sentence], Counter]:
    """The first n lines whose translation has a pair of translated words (words.first_pair), and
    how many lines before the last one taken were passed over, and why. Lines are translated a
    chunk at a time, a little more than the pairs still wanted, so that a short study translates
    little more than it studies."""
    t, skipped, out, start = model.transformer, Counter(), [], 0
    while len(out) < n and start < len(lines):
        chunk = lines[start : start + max(8, round(1.3 * (n - len(out))))]
        ids = encode(model.tokenizer, chunk)
        usable = [i for i, x in enumerate(ids) if chunk[i].strip() and fits(len(x), t.cfg.max_positions)]
        translated = dict(zip(usable, model.translate([chunk[i] for i in usable], cfg).ids))
        for i in range(len(chunk)):
            if len(out) == n:
                break
            if i not in translated:
                skipped["empty" if not chunk[i].strip() else "too long"] += 1
                continue
            own = translated[i]
            pair = first_pair(translated_words(aligned(model, chunk[i], own), model.meta.src_lang, model.meta.tgt_lang))
            if pair is None:
                skipped["no pair of translated words"] += 1
                continue
            out.append(Sentence(start + i, chunk[i], ids[i], own, decode(model.tokenizer, [own])[0], *pair))
        start += len(chunk)
    return out, skipped


@dataclass
class Batch:
    """Sentences of the study run together: `members` index the study's sentences, in row order."""

    members: list[int]
    src: Tensor  # (B, S) source ids
    tgt_in: Tensor  # (B, T) <s> and the original translation
    tgt_out: Tensor  # (B, T) the original translation and </s>


def batches(model, sentences: list[Sentence], max_tokens: int) -> list[Batch]:
    """The sentences by length in batches of about max_tokens source tokens, as translation cuts them."""
    lengths = np.array([len(s.src_ids) + 1 for s in sentences])
    out = []
    for members in token_budget_batches(lengths, max_tokens, np.argsort(lengths, kind="stable")):
        chosen = [sentences[k] for k in members]
        c = model.transformer.cfg
        x = build_inputs([s.src_ids for s in chosen], [s.original for s in chosen], c.specials, c.max_positions)
        device = next(model.transformer.parameters()).device
        out.append(Batch(members.tolist(), x.src.to(device), x.tgt_in.to(device), x.tgt_out.to(device)))
    return out


def positions(batch: Batch, sentences: list[Sentence], get: Callable[[Sentence], int]) -> Tensor:
    """(B,) one source position per row of the batch."""
    return torch.tensor([get(sentences[k]) for k in batch.members], device=batch.src.device)


@dataclass
class Pass:
    """One sentence under one edit (or none)."""

    edited: list[int] | None  # the translation searched with the edit (None: not searched)
    log_prob: np.ndarray  # (m+1,) each original output token's log-probability under the edit
    row_map: np.ndarray  # (L, n+1) cross-attention of A's rows over the source, heads and rows averaged


@torch.no_grad()
def run(
    model,
    sentences: list[Sentence],
    all_batches: list[Batch],
    sites_of: Callable[[Batch], dict[Where, Callable]],
    cfg: DecodeConfig,
    search: bool = True,
) -> list[Pass]:
    """Every sentence's Pass under the edits `sites_of` gives each batch, in the sentences' order."""
    t = model.transformer
    out: list[Pass | None] = [None] * len(sentences)
    every_layer = WeightRequest(cross=tuple(range(len(t.decoder_layers))))
    for batch in all_batches:
        with edited(t, sites_of(batch)):
            found = [h.tokens for h in generate(t, batch.src, cfg)] if search else [None] * len(batch.members)
            logits, weights = t(batch.src, batch.tgt_in, need_weights=every_layer)  # (B, T, V)
        log_prob = logits.float().log_softmax(-1).gather(-1, batch.tgt_out[..., None])[..., 0]  # (B, T)
        cross = torch.stack(weights.cross, dim=1).float()  # (B, L, H, T, S)
        for row, k in enumerate(batch.members):
            s = sentences[k]
            row_map = cross[row][:, :, list(s.a.rows), : len(s.src_ids) + 1].mean(dim=(1, 2))  # (L, n+1)
            out[k] = Pass(found[row], log_prob[row, : len(s.original) + 1].cpu().numpy(), row_map.cpu().numpy())
    return out
