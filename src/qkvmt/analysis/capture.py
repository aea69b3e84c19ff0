"""The inputs of every attention layer in one forced pass, for analyses that recompute what the
layer did from them (Q, K and V through the module's own head_projections).

Forward hooks record each MultiHeadAttention's query input x and key/value input y (None in
self-attention), what it fed W_O, and the residual stream around it (the attention block's input
and output), and are removed before the function returns: nothing is stored on the model.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.layers import Residual
from qkvmt.model.transformer import AttentionWeights, Transformer

KINDS = ("encoder", "decoder", "cross")


@dataclass
class LayerInputs:
    x: Tensor  # (B, T_q, D): the queries' input
    y: Tensor | None  # (B, T_k, D): the keys' and values' input; None in self-attention (y = x)
    heads: Tensor  # (B, T_q, D): the heads' outputs side by side, as W_O received them
    residual: Tensor  # (B, T_q, D): the residual stream entering the block (x itself in post-LN)
    block_out: Tensor  # (B, T_q, D): what leaves the block: LN(residual + attention) post-LN, their sum pre-LN
    block: Residual  # the block's residual connection and layer norm
    module: MultiHeadAttention  # the attention itself

    def attention_out(self) -> Tensor:
        """(B, T_q, D): the attention's output, W_O of the heads' outputs, bias included."""
        return self.module.w_o(self.heads)


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


@torch.no_grad()
def forced_pass(model: Transformer, src: Tensor, tgt: Tensor) -> tuple[Tensor, AttentionWeights, dict[str, list[LayerInputs]]]:
    """The logits (B, T, V) and the weights of every layer and head of a teacher-forced pass, and
    each layer's inputs: {kind: [LayerInputs per layer]}."""
    seen: dict[int, dict] = {}
    hooks = []
    for kind in KINDS:
        for module, block in zip(attention_modules(model, kind), attention_blocks(model, kind)):
            record = seen.setdefault(id(module), {"block": block, "module": module})
            hooks.append(module.register_forward_hook(
                lambda m, args, kwargs, out, r=record: r.update(x=args[0], y=args[1] if len(args) > 1 else kwargs.get("y")),
                with_kwargs=True))
            hooks.append(module.w_o.register_forward_hook(lambda m, args, out, r=record: r.update(heads=args[0])))
            hooks.append(block.register_forward_hook(lambda m, args, out, r=record: r.update(residual=args[0], block_out=out[0])))
    try:
        logits, att = model(src, tgt, need_weights=True)
    finally:
        for h in hooks:
            h.remove()
    inputs = {kind: [LayerInputs(**seen[id(m)]) for m in attention_modules(model, kind)] for kind in KINDS}
    return logits, att, inputs
