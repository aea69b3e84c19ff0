"""Text in, text out: the one translation path shared by validation, test, evaluate.py,
translate.py and align.py, so a score logged in training is the score evaluation reproduces.

Lines are encoded, sorted by length and cut into token-budget batches, decoded, detokenized,
and put back in input order. An empty line translates to an empty line.
"""

import logging
import sys

import numpy as np
import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from qkvmt.decoding.engine import Engine, engine_for, generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.inputs import build_inputs, fits, token_budget_batches
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import decode, encode

log = logging.getLogger(__name__)


def encode_sources(tokenizer: Tokenizer, lines: list[str], max_positions: int) -> list[list[int]]:
    """Subword ids of each line (no </s>); one longer than the model's positions will be cut by
    build_inputs, and is named in a warning here."""
    ids = encode(tokenizer, lines)
    too_long = [i for i, x in enumerate(ids) if not fits(len(x), max_positions)]
    if too_long:
        log.warning(
            "%d sentence(s) longer than max_positions=%d tokens are cut to fit (first: line %d)",
            len(too_long),
            max_positions,
            too_long[0] + 1,
        )
    return ids


def translate_lines(
    model: Transformer, tokenizer: Tokenizer, lines: list[str], cfg: DecodeConfig, progress: bool = False
) -> list[str]:
    """Detokenized translations of `lines`, in order."""
    return decode(tokenizer, translate_ids(model, tokenizer, lines, cfg, progress))


def translate_ids(
    model: Transformer,
    tokenizer: Tokenizer,
    lines: list[str],
    cfg: DecodeConfig,
    progress: bool = False,
    engine: Engine | None = None,
) -> list[list[int]]:
    """The generated subword ids of each line (no <s>/</s>), in order; [] for an empty line.
    With `progress`, a bar on stderr counts sentences and sentences/s. engine: the one every batch
    decodes on (default: engine_for the whole call)."""
    ids = encode_sources(tokenizer, lines, model.cfg.max_positions)
    device = next(model.parameters()).device
    engine = engine or engine_for(model, device, cfg, len(lines))
    lengths = np.array([min(len(x) + 1, model.cfg.max_positions) if x else 0 for x in ids])
    nonempty = np.flatnonzero(lengths > 0)
    order = nonempty[np.argsort(lengths[nonempty], kind="stable")]
    out: list[list[int]] = [[] for _ in lines]
    bar = tqdm(total=len(lines), unit="sent", file=sys.stderr, disable=not progress, dynamic_ncols=True)
    with bar:
        bar.update(len(lines) - len(nonempty))
        for batch in token_budget_batches(lengths, cfg.max_tokens, order):
            src = build_inputs([ids[i] for i in batch], None, model.cfg.specials, model.cfg.max_positions).src.to(
                device
            )
            lines_of = torch.as_tensor(batch, dtype=torch.long, device=device)
            for i, hyp in zip(batch, generate(model, src, cfg, lines_of, engine)):
                out[i] = hyp.tokens
            bar.update(len(batch))
    return out
