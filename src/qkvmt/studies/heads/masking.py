"""Which heads matter: each head's effect on the translation when it is masked (Michel et al. 2019,
"Are Sixteen Heads Really Better than One?"), and what each head looks at (Voita et al. 2019):
the entropy of its weights, the share it puts on `</s>` and punctuation, and whether it is
positional, mostly attending to one relative position.

A head is masked by zeroing its slice of the heads' outputs before W_O, so nothing of it reaches
the residual stream; the other heads and the rest of the layer are untouched. The mask is written
through the layer's `heads` site (qkvmt.analysis.trace.edited) while the `masked` block is open:
decoding, search and forced passes all see it without a change to their code.
"""

from dataclasses import dataclass

import numpy as np
import torch

from qkvmt.analysis.trace import KINDS, attention_modules, edited
from qkvmt.model.transformer import Transformer
from qkvmt.text.sinks import PUNCTUATION, mass_on, sink_columns
from qkvmt.text.tokenizer import EOS

Head = tuple[str, int, int]  # (kind, layer, head)
OFFSETS = (-1, 0, 1)  # the relative positions a positional head keeps to (Voita et al.: previous, same, next)


def every_head(model: Transformer) -> list[Head]:
    return [
        (kind, layer, head)
        for kind in KINDS
        for layer, module in enumerate(attention_modules(model, kind))
        for head in range(module.n_heads)
    ]


def masked(model: Transformer, heads: list[Head]):
    """Within the block (a context manager), the given heads add nothing to their layers' outputs."""
    by_layer: dict[tuple[str, int], list[int]] = {}
    for kind, layer, head in heads:
        by_layer.setdefault((kind, layer), []).append(head)
    edits = {}
    for (kind, layer), dropped in by_layer.items():
        module = attention_modules(model, kind)[layer]
        keep = torch.ones(module.d_model)
        for h in dropped:
            keep[h * module.d_k : (h + 1) * module.d_k] = 0
        edits[(kind, layer, "heads")] = lambda t, keep=keep: t * keep.to(t.device, t.dtype)
    return edited(model, edits)


@dataclass
class HeadProfile:
    """What one head looks at, averaged over every query of the sentences it was measured on."""

    entropy: float  # of its weights, in nats (low: it looks at one key)
    eos_share: float  # of its weight on </s>
    punctuation_share: float  # of its weight on punctuation tokens
    offset: int | None  # the relative position its heaviest key most often has (key - query), if within OFFSETS
    offset_share: float  # how often the heaviest key sits there: above 0.9, Voita et al. call the head positional

    @property
    def positional(self) -> bool:
        return self.offset is not None and self.offset_share >= 0.9


def profile(weights: list[np.ndarray], key_tokens: list[list[str]], positional: bool = True) -> HeadProfile:
    """One head's profile from its weights in several sentences, (T_q, T_k) each, and their key
    tokens. positional=False (cross-attention: queries and keys are different sequences) leaves
    the offset out."""
    entropy, eos, punct, offsets, rows = 0.0, 0.0, 0.0, [], 0
    for w, keys in zip(weights, key_tokens):
        w = np.asarray(w, dtype=np.float64)
        if not w.size:
            continue
        entropy += float(-(w * np.log(np.clip(w, 1e-12, None))).sum())
        eos += float(mass_on(w, sink_columns(keys, EOS)))
        punct += float(mass_on(w, sink_columns(keys, PUNCTUATION)))
        offsets += (w.argmax(axis=1) - np.arange(len(w))).tolist()
        rows += len(w)
    counts = {o: offsets.count(o) for o in OFFSETS}
    top = max(counts, key=counts.get)
    offset, share = (top, counts[top] / max(rows, 1)) if positional and counts[top] else (None, 0.0)
    return HeadProfile(entropy / max(rows, 1), eos / max(rows, 1), punct / max(rows, 1), offset, share)
