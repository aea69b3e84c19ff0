"""One teacher-forced pass, traced: what every attention layer computed, at named sites.

The sites of each (kind, layer), kind one of KINDS:

    x, y        (B, T_q, D), (B, T_k, D)   the attention's query input and, in cross-attention,
                                           its key and value input (None in self-attention)
    q, k, v     (B, H, T, d_k)             per head, positions applied, as the kernel used them
    scores      (B, H, T_q, T_k)           QKᵀ/√d_k, -inf where a key is masked
    weights     (B, H, T_q, T_k)           their softmax
    heads       (B, T_q, D)                the heads' outputs side by side: W_O's input
    attention   (B, T_q, D)                W_O(heads) + b_O, the attention's output
    residual    (B, T_q, D)                the residual stream entering the block
    block_out   (B, T_q, D)                what leaves the block (after its layer norm, post-LN)

and of the model: `src_embedded` (B, S, D) and `tgt_embedded` (B, T, D), the embeddings with
their positions, and the logits (B, T, V).

`trace()` reads every site in one pass; `edited()` replaces the tensor at any writable site
(WRITABLE) while its block is open: head masking, value zeroing and deleted source tokens all
write through it, in forced passes and in search alike. Either way a site is reached by a hook
on its module (qkvmt.model.sites), removed before the function returns: nothing stays on the
model.
"""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.layers import Residual
from qkvmt.model.sites import ATTENTION_SITES
from qkvmt.model.transformer import AttentionWeights, Transformer

KINDS = ("encoder", "decoder", "cross")
MODEL_SITES = ("src_embedded", "tgt_embedded")
WRITABLE = (*ATTENTION_SITES, "heads", "attention", "block_out")  # per (kind, layer); and MODEL_SITES

Edit = Callable[[Tensor], Tensor]
Where = tuple[str, int, str] | str  # (kind, layer, site), or a model site


def attention_modules(model: Transformer, kind: str) -> list[MultiHeadAttention]:
    """The attention modules of one kind, layer by layer."""
    if kind == "encoder":
        return [layer.self_attn for layer in model.encoder_layers]
    return [layer.self_attn if kind == "decoder" else layer.cross_attn for layer in model.decoder_layers]


def attention_blocks(model: Transformer, kind: str) -> list[Residual]:
    """The residual blocks around the attention modules of one kind, layer by layer."""
    if kind == "encoder":
        return [layer.attn_block for layer in model.encoder_layers]
    return [layer.self_block if kind == "decoder" else layer.cross_block for layer in model.decoder_layers]


@dataclass
class LayerTrace:
    """The sites of one attention layer in one pass (the module docstring gives the shapes)."""

    kind: str
    layer: int
    module: MultiHeadAttention
    block: Residual  # its residual connection and layer norm
    x: Tensor = None
    y: Tensor | None = None
    q: Tensor = None
    k: Tensor = None
    v: Tensor = None
    scores: Tensor = None
    weights: Tensor = None
    heads: Tensor = None
    attention: Tensor = None
    residual: Tensor = None
    block_out: Tensor = None

    def tensors(self) -> dict[str, Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Tensor)}


@dataclass
class Trace:
    """A traced forced pass of (src, tgt_in): the logits, the embeddings and every attention
    layer's sites, `layers[kind][layer]`."""

    src: Tensor  # (B, S) ids
    tgt: Tensor  # (B, T) ids, tgt_in
    logits: Tensor  # (B, T, V)
    src_embedded: Tensor
    tgt_embedded: Tensor
    layers: dict[str, list[LayerTrace]]

    def __getitem__(self, where: tuple[str, int]) -> LayerTrace:
        kind, layer = where
        return self.layers[kind][layer]

    def weights(self) -> AttentionWeights:
        """Every layer's weights, as the model returns them with need_weights=True."""
        return AttentionWeights(*([t.weights for t in self.layers[kind]] for kind in KINDS))


def _hooks(model: Transformer, read: Callable[[Where, Tensor], None] | None, edits: dict[Where, Edit]) -> list:
    """Hooks that report each site's tensor to `read` and replace it by its edit, if any."""

    def site_value(where: Where, t: Tensor) -> Tensor:
        if where in edits:
            t = edits[where](t)
        if read is not None:
            read(where, t)
        return t

    hooks = []
    for kind in KINDS:
        for layer, (module, block) in enumerate(zip(attention_modules(model, kind), attention_blocks(model, kind))):
            at = lambda name, kind=kind, layer=layer: (kind, layer, name)  # noqa: E731
            for name in ATTENTION_SITES:
                hooks.append(module.sites[name].register_forward_hook(lambda m, a, out, w=at(name): site_value(w, out)))
            hooks.append(module.w_o.register_forward_pre_hook(lambda m, a, w=at("heads"): (site_value(w, a[0]),)))
            if read is not None:

                def inputs(m, a, kw, x=at("x"), y=at("y")):  # forward(x, y=None, ...): y is None in self-attention
                    read(x, a[0])
                    read(y, a[1] if len(a) > 1 else kw.get("y"))

                hooks.append(module.register_forward_pre_hook(inputs, with_kwargs=True))
                hooks.append(block.register_forward_pre_hook(lambda m, a, w=at("residual"): read(w, a[0])))
            hooks.append(
                module.register_forward_hook(lambda m, a, out, w=at("attention"): (site_value(w, out[0]), out[1]))
            )
            hooks.append(
                block.register_forward_hook(lambda m, a, out, w=at("block_out"): (site_value(w, out[0]), out[1]))
            )
    for name, embed in (("src_embedded", model.src_embed), ("tgt_embedded", model.tgt_embed)):
        hooks.append(embed.register_forward_hook(lambda m, a, out, w=name: site_value(w, out)))
    return hooks


def _checked(model: Transformer, edits: dict[Where, Edit]) -> dict[Where, Edit]:
    for where in edits:
        if isinstance(where, str):
            if where not in MODEL_SITES:
                raise ValueError(f"no model site {where!r}: use one of {', '.join(MODEL_SITES)}")
            continue
        kind, layer, name = where
        if (
            kind not in KINDS
            or name not in WRITABLE
            or not -len(attention_modules(model, kind)) <= layer < len(attention_modules(model, kind))
        ):
            raise ValueError(
                f"no writable site {where!r}: a kind of {KINDS}, a layer of it, and one of {', '.join(WRITABLE)}"
            )
    return {
        (w if isinstance(w, str) else (w[0], w[1] % len(attention_modules(model, w[0])), w[2])): f
        for w, f in edits.items()
    }


@contextlib.contextmanager
def edited(model: Transformer, edits: dict[Where, Edit]):
    """Within the block, each site's tensor is replaced by edit(tensor). The attention sites of
    ATTENTION_SITES exist on the explicit path only (a forward that asks for weights); `heads`,
    `attention`, `block_out` and the embeddings on every path, search included."""
    hooks = _hooks(model, None, _checked(model, edits))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def trace(
    model: Transformer,
    src: Tensor,
    tgt: Tensor,
    edits: dict[Where, Edit] | None = None,
    grad_of: tuple[int, int] | None = None,
) -> Trace:
    """Trace one teacher-forced pass of src (B, S) and tgt_in (B, T), with `edits` applied.

    grad_of=(t, token): the pass runs with gradients, and every site's tensor of batch row 0
    holds in `.grad` the gradient of log p(token) at target row t."""
    seen: dict[Where, Tensor] = {}

    def read(where: Where, t: Tensor | None) -> None:
        if t is not None and grad_of is not None and t.requires_grad:
            t.retain_grad()
        seen[where] = t

    hooks = _hooks(model, read, _checked(model, edits or {}))
    try:
        with torch.set_grad_enabled(grad_of is not None):
            logits, _ = model(src, tgt, need_weights=True)
            if grad_of is not None:
                row, token = grad_of
                logits[0, row].float().log_softmax(-1)[token].backward()
    finally:
        for h in hooks:
            h.remove()
    layers = {
        kind: [
            LayerTrace(
                kind,
                layer,
                module,
                block,
                **{
                    name: seen.get((kind, layer, name))
                    for name in ("x", "y", *ATTENTION_SITES, "heads", "attention", "residual", "block_out")
                },
            )
            for layer, (module, block) in enumerate(zip(attention_modules(model, kind), attention_blocks(model, kind)))
        ]
        for kind in KINDS
    }
    return Trace(src, tgt, logits, seen["src_embedded"], seen["tgt_embedded"], layers)
