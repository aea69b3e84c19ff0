"""Text in, text out: the one translation path shared by validation, test, evaluate.py,
translate.py and align.py, so a score logged in training is the score evaluation reproduces.

Lines are encoded, sorted by length and cut into token-budget batches, decoded, detokenized,
and put back in input order. An empty line translates to an empty line.
"""

import contextlib
import logging
import sys

import numpy as np
import torch
from tokenizers import Tokenizer
from tqdm import tqdm

from qkvmt.decoding.compute_type import computing
from qkvmt.decoding.engine import Engine, engine_for, generate, hooked_modules
from qkvmt.decoding.rows import are_rows_kept
from qkvmt.decoding.running import RunningSearch
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs, fits, token_budget_batches
from qkvmt.model.transformer import Transformer
from qkvmt.model.weight_casts import cast_once
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


class RunningLines:
    """Lines in, each translation out as soon as it is done: a search that lines join while it runs
    (qkvmt.decoding.running, continuous batching), from within `running_lines`."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, cfg: DecodeConfig):
        self.model, self.tokenizer, self.search = model, tokenizer, RunningSearch(model, cfg)
        self.device = next(model.parameters()).device

    def __len__(self) -> int:
        """The lines not yet done."""
        return len(self.search)

    def join(self, lines: list[str], tags: list) -> list[tuple[object, str]]:
        """`lines`, named `tags`, join the search at its next step; the empty ones are done at once (an
        empty translation each), and returned with their tags."""
        ids = encode_sources(self.tokenizer, lines, self.model.cfg.max_positions)
        given = [(tag, x) for tag, x in zip(tags, ids) if x]
        if given:
            c = self.model.cfg
            src = build_inputs([x for _, x in given], None, c.specials, c.max_positions).src.to(self.device)
            self.search.join(src, [tag for tag, _ in given])
        return [(tag, "") for tag, x in zip(tags, ids) if not x]

    def step(self) -> list[tuple[object, str]]:
        """A token more for every line; the lines done at it, with their translations."""
        done = self.search.step()
        return list(zip((d.tag for d in done), decode(self.tokenizer, [d.hypothesis.tokens for d in done])))


@contextlib.contextmanager
def running_lines(model: Transformer, tokenizer: Tokenizer, cfg: DecodeConfig):
    """A RunningLines of `cfg`, computing in cfg.compute_type while the block lasts (each parameter cast
    once, as a call's search does). Only the eager step runs it, and only on a model no hook or edit
    reads: a UserError for settings or a model it cannot run as asked."""
    why_not = cannot_join(cfg)
    if why_not:
        raise UserError(why_not)
    if hooked_modules(model) or are_rows_kept():
        raise UserError("a hook or edit is set on the model: a search that lines join runs none")
    device = next(model.parameters()).device
    with torch.inference_mode(), computing(cfg.compute_type, device), cast_once():
        yield RunningLines(model, tokenizer, cfg)


def cannot_join(cfg: DecodeConfig) -> str | None:
    """Why a search of `cfg` cannot be one that lines join while it runs, or None where it can."""
    if cfg.compile == "true":
        return "decode.compile=true: a search that lines join runs on the eager step; set decode.compile=auto or false"
    if not cfg.use_cache:
        return "decode.use_cache=false: a search that lines join runs over the KV cache; set decode.use_cache=true"
    return None
