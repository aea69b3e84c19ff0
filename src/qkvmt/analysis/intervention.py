"""One sentence, translated before and after an edit of its attention (qkvmt.analysis.edits).

The edited translation is a fresh search with the edit applied at every step (the model's own
decoding settings; without the KV cache only when an edit names query positions). The two
translations are then compared where they can be: the original translation is forced through
the model with and without the edit, which gives each of its tokens' log-probability change and
the cross-attention maps before and after over the same rows.
"""

import difflib
from dataclasses import dataclass, replace

import numpy as np
import torch
from tokenizers import Tokenizer

from qkvmt.analysis.edits import Shape, compiled, prepared
from qkvmt.analysis.forced import target_names, token_names
from qkvmt.analysis.trace import KINDS, attention_modules, edited, query_positional, trace
from qkvmt.decoding.lines import translate_ids
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import decode, encode


@dataclass
class InterventionPass:
    """What an edit did to one sentence's translation."""

    source: str
    edits: list  # the edit objects, as given
    src_tokens: list[str]  # x_1 .. x_n </s>: the key positions
    original: str  # the translation without the edit
    edited: str  # the translation with it
    original_tokens: list[str]  # y_1 .. y_m </s> of the original: the rows of the maps
    edited_tokens: list[str]
    changed: list[bool]  # per word of `edited`: not where the original has it
    log_prob: np.ndarray  # (m+1,) each original token's log-probability without the edit
    log_prob_edited: np.ndarray  # (m+1,) ... and with it, forced over the same tokens
    cross_before: np.ndarray  # (L, H, m+1, n+1) cross-attention over the original translation
    cross_after: np.ndarray  # (L, H, m+1, n+1) the same, with the edit

    @property
    def log_prob_change(self) -> np.ndarray:
        return self.log_prob_edited - self.log_prob


def changed_words(original: str, edited: str) -> list[bool]:
    """For each word of `edited`: True unless it is one of the original's, in its order (a diff)."""
    a, b = original.split(), edited.split()
    same = [False] * len(b)
    for block in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        same[block.b : block.b + block.size] = [True] * block.size
    return [not s for s in same]


def shape_of(model: Transformer, src_len: int, out_len: int | None) -> Shape:
    module = attention_modules(model, "cross")[0]
    layers = {kind: len(attention_modules(model, kind)) for kind in KINDS}
    return Shape(layers, module.n_heads, module.d_k, src_len, out_len)


def forced_rows(model: Transformer, src, tgt_in, tgt_out, sites) -> tuple[np.ndarray, np.ndarray]:
    """Each forced token's log-probability (T,) and the cross-attention (L, H, T, S), under `sites`."""
    traced = trace(model, src, tgt_in, edits=sites)
    log_prob = traced.logits[0].float().log_softmax(-1).gather(-1, tgt_out[0][:, None])[:, 0]
    cross = torch.stack([t.weights[0] for t in traced.layers["cross"]])
    return log_prob.cpu().numpy(), cross.float().cpu().numpy()


@torch.no_grad()
def translate_with_and_without(
    model: Transformer, tokenizer: Tokenizer, source: str, edits, cfg: DecodeConfig, original: list[int] | None = None
) -> InterventionPass:
    """`source` translated with and without `edits` (decoded by `cfg`), and compared. `original`:
    the unedited translation's subword ids where the caller already has them from `cfg`'s search."""
    c, device = model.cfg, next(model.parameters()).device
    src_ids = encode(tokenizer, [source])[0]
    src_len = build_inputs([src_ids], None, c.specials, c.max_positions).src.size(1)
    ready = prepared(edits, model, tokenizer, src_ids)
    # Checked before any search but for output positions, which name tokens of the translation
    # itself (negative: from its end), checked once it is known.
    compiled(edits, shape_of(model, src_len, None), ready)
    if original is None:
        original = translate_ids(model, tokenizer, [source], cfg)[0]
    sites = compiled(edits, shape_of(model, src_len, len(original) + 1), ready)  # + 1: </s>
    x = build_inputs([src_ids], [original], c.specials, c.max_positions)
    src, tgt_in, tgt_out = x.src.to(device), x.tgt_in.to(device), x.tgt_out.to(device)
    with edited(model, sites):
        changed = translate_ids(
            model, tokenizer, [source], replace(cfg, use_cache=not query_positional(sites.values()))
        )[0]
    log_prob, before = forced_rows(model, src, tgt_in, tgt_out, {})
    log_prob_edited, after = forced_rows(model, src, tgt_in, tgt_out, sites)
    original_text, edited_text = decode(tokenizer, [original, changed])
    return InterventionPass(
        source=source,
        edits=list(edits),
        src_tokens=token_names(tokenizer, x.src[0]),
        original=original_text,
        edited=edited_text,
        original_tokens=target_names(tokenizer, x.tgt_out[0]),
        edited_tokens=target_names(tokenizer, [*changed, c.eos_id]),
        changed=changed_words(original_text, edited_text),
        log_prob=log_prob,
        log_prob_edited=log_prob_edited,
        cross_before=before,
        cross_after=after,
    )
