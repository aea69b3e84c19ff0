"""What each layer already knows.

DecoderLens (Langedijk et al., 2023): the decoder reads the output of encoder layer k instead of
the last one's, so each encoder depth gets a translation of its own; where those stop improving,
the encoder's later layers add little the decoder uses.

The logit lens (nostalgebraist, 2020) for the decoder: each decoder layer's output goes through
the final layer norm and the output embedding as if it were the last, giving the tokens that
layer would already predict at each position of the model's translation.

Both are hooks on the model's own layers while a block is open (nothing stays on the model), so
search, forced passes and every reading of the model see them unchanged; they fire in the calling
thread only (qkvmt.analysis.hooks): another thread translating meanwhile sees the whole model.
"""

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from qkvmt.analysis.forced import target_names
from qkvmt.analysis.hooks import after
from qkvmt.decoding.lines import translate_ids
from qkvmt.decoding.rows import rows_kept
from qkvmt.decoding.search import DecodeConfig
from qkvmt.decoding.step_view import sentences_searched
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import decode, encode


def check_depth(model: Transformer, depth) -> None:
    n = len(model.encoder_layers)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= n:
        raise UserError(f"encoder depth {depth!r}: the model has encoder layers 1..{n}")


@contextlib.contextmanager
def encoder_depth(model: Transformer, depth: int):
    """Within the block the encoder ends after its first `depth` layers: each later layer hands its
    input on unchanged, so the final norm (pre-LN) and every cross-attention read layer `depth`'s
    output."""
    check_depth(model, depth)
    hooks = [after(layer, lambda m, args, out: (args[0], out[1])) for layer in model.encoder_layers[depth:]]
    try:
        with rows_kept():  # each depth's search keeps every sentence's rows, as an edit's does
            yield
    finally:
        for h in hooks:
            h.remove()


@contextlib.contextmanager
def encoder_depths(model: Transformer, depths: list[int]):
    """encoder_depth with a depth of each line's own: within the block, line i of a search
    (qkvmt.decoding.step_view; row i of a pass outside one) reads the output of encoder layer
    depths[i]. The encoder runs once, before the first step, with every line of its batch in it,
    so the search may let done lines leave as it goes."""
    for depth in depths:
        check_depth(model, depth)
    depth_of = torch.tensor(depths)

    def stop_from(i: int):
        def hook(m, args, out):
            x = args[0]
            stopped = depth_of.to(x.device)[sentences_searched(x.size(0), x.device)] <= i  # (B,)
            return torch.where(stopped[:, None, None], x, out[0]), out[1]

        return hook

    hooks = [after(layer, stop_from(i)) for i, layer in enumerate(model.encoder_layers)]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def depth_ids(
    model: Transformer, tokenizer: Tokenizer, lines: list[str], cfg: DecodeConfig, progress: bool = False
) -> list[list[list[int]]]:
    """DecoderLens: the subword ids of each line's translation with the decoder reading each
    encoder depth, [depth - 1][line]; the last depth is the model itself. One search translates
    a copy of the lines for each depth: a step of a few rows costs about what one of many does
    (it reads every weight once), so one search of L copies takes far less than L searches."""
    n, layers = len(lines), len(model.encoder_layers)
    with encoder_depths(model, [depth for depth in range(1, layers + 1) for _ in lines]):
        ids = translate_ids(model, tokenizer, lines * layers, cfg, progress)
    return [ids[d * n : (d + 1) * n] for d in range(layers)]


def depth_translations(
    model: Transformer, tokenizer: Tokenizer, lines: list[str], cfg: DecodeConfig, progress: bool = False
) -> list[list[str]]:
    """depth_ids' translations as text, [depth - 1][line]."""
    return [decode(tokenizer, ids) for ids in depth_ids(model, tokenizer, lines, cfg, progress)]


def decoder_layer_outputs(model: Transformer, src: Tensor, tgt_in: Tensor) -> list[Tensor]:
    """Each decoder layer's output (B, T, D) in a teacher-forced pass."""
    seen: list[Tensor] = []
    hooks = [after(layer, lambda m, a, out: seen.append(out[0])) for layer in model.decoder_layers]
    try:
        model(src, tgt_in)
    finally:
        for h in hooks:
            h.remove()
    return seen


@dataclass
class LensPass:
    """One sentence read by both lenses."""

    source: str
    depths: list[str]  # the translation with the decoder reading encoder layer 1, 2, .. (the last: the model)
    tokens: list[str]  # y_1 .. y_m </s>: the model's own translation, the logit lens's positions
    top_tokens: list[list[list[str]]]  # [decoder layer][position][rank]: what that layer would predict
    top_probs: np.ndarray  # (L_dec, T, k) their probabilities
    final_rank: np.ndarray  # (L_dec, T): the rank the model's own next token has at that layer (0: top)


@torch.no_grad()
def lens(model: Transformer, tokenizer: Tokenizer, source: str, cfg: DecodeConfig, top_k: int = 3) -> LensPass:
    """DecoderLens translations of `source` and the logit lens over the model's translation."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= model.cfg.target_vocab_size:
        raise UserError(
            f"top_k={top_k!r}: give a whole number from 1 to the vocabulary's {model.cfg.target_vocab_size}"
        )
    per_depth = [d[0] for d in depth_ids(model, tokenizer, [source], cfg)]
    depths, ids = decode(tokenizer, per_depth), per_depth[-1]  # the last depth is the model's own translation
    c, device = model.cfg, next(model.parameters()).device
    x = build_inputs([encode(tokenizer, [source])[0]], [ids], c.specials, c.max_positions)
    tgt_out = x.tgt_out[0].to(device)
    probs = torch.stack(
        [
            model.output(model.decoder_norm(h))[0].float().softmax(-1)
            for h in decoder_layer_outputs(model, x.src.to(device), x.tgt_in.to(device))
        ]
    )  # (L_dec, T, V)
    top = probs.topk(top_k, dim=-1)
    own = probs.gather(-1, tgt_out[None, :, None].expand(probs.size(0), -1, 1))  # (L_dec, T, 1)
    return LensPass(
        source=source,
        depths=depths,
        tokens=target_names(tokenizer, tgt_out),
        top_tokens=[[target_names(tokenizer, row) for row in layer] for layer in top.indices.tolist()],
        top_probs=top.values.cpu().numpy(),
        final_rank=(probs > own).sum(-1).cpu().numpy(),
    )
