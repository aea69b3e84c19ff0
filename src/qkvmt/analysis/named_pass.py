"""A forced pass of sentences with hooks by name, keeping the activations asked for: what
`Model.run_with_cache` and `Model.run_with_hooks` run, and what the patching study batches.

Only the names asked for are hooked, and only the attention layers with an explicit-path name among
them leave the fused kernel, so caching one layer's weights copies nothing else.
"""

from dataclasses import dataclass

import torch
from tokenizers import Tokenizer
from torch import Tensor

from qkvmt.analysis.forced import target_names, token_names
from qkvmt.analysis.hooking import Call, Hook, hooked
from qkvmt.errors import UserError
from qkvmt.model.hook_names import hook_points, resolved
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import encode


@dataclass
class NamedPass:
    """The activations of one forced pass by name, and the tokens that label their axes."""

    activations: dict[str, Tensor]
    axes: dict[str, tuple[str, ...]]
    sides: dict[str, dict[str, str]]  # name -> {axis: "source" or "target"} for its axes of positions
    source_tokens: list[list[str]]  # per sentence, </s> included, unpadded
    target_tokens: list[list[str]]  # per sentence, what each decoder position reads: <s> y_1 .. y_m
    output_tokens: list[list[str]]  # per sentence, what each decoder position predicts: y_1 .. y_m </s>
    logits: Tensor  # (B, T, V)


def hooks_by_name(model: Transformer, hooks: dict[str, Hook] | None) -> dict[str, list[Hook]]:
    """{name or glob: fn} as {name: [fn, ...]}: every name a pattern matches takes its function, in the
    order given. A bad pattern, or anything but a function, is a one-line UserError."""
    if not hooks:
        return {}
    if not isinstance(hooks, dict):
        raise UserError(f"hooks={hooks!r}: give a dict of {{name or glob: fn(activation, ctx)}}")
    for pattern, fn in hooks.items():
        if not callable(fn):
            raise UserError(f"hooks[{pattern!r}]={fn!r}: give a function fn(activation, ctx)")
    out: dict[str, list[Hook]] = {}
    for pattern, names in resolved(hooks, hook_points(model), "hook").items():
        for name in names:
            out.setdefault(name, []).append(hooks[pattern])
    return out


def names_wanted(model: Transformer, names) -> list[str]:
    """The names a pattern, or a list of them, stands for (None: every one), in forward order."""
    points = hook_points(model)
    if names is None:
        return list(points)
    patterns = [names] if isinstance(names, str) else list(names)
    wanted = {n for found in resolved(patterns, points).values() for n in found}
    return [n for n in points if n in wanted]


def unpadded(ids: Tensor, lengths: Tensor, names) -> list[list[str]]:
    """Each row's tokens up to its length (a pad may be a model's first target token, as Marian's is)."""
    return [names(row[:n]) for row, n in zip(ids.tolist(), lengths.tolist())]


def call_of(
    model: Transformer, tokenizer: Tokenizer, src: Tensor, tgt_in: Tensor | None = None, tgt_out: Tensor | None = None
) -> Call:
    """Token labels of a batch, for hooks' contexts: made only if a hook asks. tgt_in, tgt_out: (B, T)
    the tokens each position reads and predicts (rows of tgt_out end in </s>, then pads); None in search."""
    pad = model.cfg.pad_id

    def targets():
        return unpadded(tgt_in, (tgt_out != pad).sum(-1), lambda r: target_names(tokenizer, r))

    return Call(
        source_tokens=lambda: unpadded(src, (src != pad).sum(-1), lambda r: token_names(tokenizer, r)),
        target_tokens=targets if tgt_in is not None else list,
        id_tokens=lambda ids: target_names(tokenizer, ids),
    )


def lines_call(model: Transformer, tokenizer: Tokenizer, lines: list[str]) -> Call:
    """The token labels a search's hooks may ask for: each line's source tokens, </s> included."""
    eos = model.cfg.eos_id
    return Call(
        source_tokens=lambda: [token_names(tokenizer, [*ids, eos]) for ids in encode(tokenizer, lines)],
        id_tokens=lambda ids: target_names(tokenizer, ids),
    )


def batch_of(model: Transformer, tokenizer: Tokenizer, sources: list[str], targets: list[list[int]]):
    c, device = model.cfg, next(model.parameters()).device
    x = build_inputs(encode(tokenizer, sources), targets, c.specials, c.max_positions)
    return x.src.to(device), x.tgt_in.to(device), x.tgt_out.to(device)


def named_pass(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: list[str],
    targets: list[list[int]],
    names: list[str],
    hooks: dict[str, list[Hook]] | None = None,
    grad: bool = False,
) -> NamedPass:
    """One forced pass of `sources` over `targets` (target ids, no specials) with `hooks` (by name),
    keeping the activations of `names` (resolved names, see names_wanted)."""
    points = hook_points(model)
    src, tgt_in, tgt_out = batch_of(model, tokenizer, sources, targets)
    kept: dict[str, Tensor] = {}

    def read(name: str, t: Tensor) -> None:
        kept[name] = t if grad else t.detach()

    call = call_of(model, tokenizer, src, tgt_in, tgt_out)
    with hooked(model, hooks, read, names, call), torch.set_grad_enabled(grad):
        logits, _ = model(src, tgt_in)
    lengths = (tgt_out != model.cfg.pad_id).sum(-1)
    return NamedPass(
        activations=kept,
        axes={n: points[n].spec.axes for n in kept},
        sides={n: {a: points[n].side(a) for a in points[n].spec.axes if points[n].side(a)} for n in kept},
        source_tokens=call.once("source", call.source_tokens),
        target_tokens=call.once("target", call.target_tokens),
        output_tokens=unpadded(tgt_out, lengths, lambda r: target_names(tokenizer, r)),
        logits=logits,
    )
