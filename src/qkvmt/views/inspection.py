"""Q, K and V of one attention head, as the model computed them for one sentence pair.

For head h of a layer, with x the queries' input and y the keys' input (y = x in self-attention,
the encoder output in cross-attention):

    Q = x W_Q[:, h]   K = y W_K[:, h]   V = y W_V[:, h]          (each T × d_k)
    scores = Q Kᵀ / √d_k      weights = softmax(scores + mask)      output = weights V

The layer's inputs and the input of W_O (the heads' outputs side by side) are captured with
forward hooks during one forced pass and removed at once; Q, K, V are then recomputed from the
module's own projections, and the head's output is checked against what the forward pass fed
into W_O.
"""

import math

import torch

from qkvmt.model.attention import MultiHeadAttention, causal_mask
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.views.sentence_attention import KINDS, pair_ids, row_col_labels, token_names


def attention_module(model: Transformer, kind: str, layer: int) -> MultiHeadAttention:
    if kind not in KINDS:
        raise UserError(f"kind={kind!r}: use one of {', '.join(KINDS)}")
    layers = model.encoder_layers if kind == "encoder" else model.decoder_layers
    if not -len(layers) <= layer < len(layers):
        raise UserError(f"layer={layer}: the {kind} has {len(layers)} layers (0..{len(layers) - 1}, or -1 for the last)")
    block = layers[layer]
    return block.self_attn if kind in ("encoder", "decoder") else block.cross_attn


@torch.no_grad()
def inspect_head(model: Transformer, tokenizer, source: str, target: str | list[int], kind: str, layer: int, head: int, top_k: int = 3) -> dict:
    c = model.cfg
    module = attention_module(model, kind, layer)
    if not -module.n_heads <= head < module.n_heads:
        raise UserError(f"head={head}: layers have {module.n_heads} heads (0..{module.n_heads - 1})")
    head %= module.n_heads
    device = next(model.parameters()).device
    inputs = build_inputs(*([ids] for ids in pair_ids(tokenizer, source, target)), c.specials, c.max_positions)

    seen = {}
    hooks = [
        module.register_forward_hook(lambda m, args, kwargs, out: seen.update(args=args, kwargs=kwargs), with_kwargs=True),
        module.w_o.register_forward_hook(lambda m, args, out: seen.update(heads=args[0])),
    ]
    try:
        _, att = model(inputs.src.to(device), inputs.tgt_in.to(device), need_weights=True)
    finally:
        for h in hooks:
            h.remove()

    x = seen["args"][0]
    y = seen["args"][1] if len(seen["args"]) > 1 else seen["kwargs"].get("y")
    y = x if y is None else y
    sl = slice(head * module.d_k, (head + 1) * module.d_k)
    k, v = (p[0, :, sl] for p in module.project_kv(y))  # (T_k, d_k) each
    q = module.project_q(x)[0, :, sl]  # (T_q, d_k)
    scores = q @ k.T / math.sqrt(module.d_k)  # (T_q, T_k)
    allowed = torch.ones_like(scores, dtype=torch.bool)
    if kind == "decoder":
        allowed &= causal_mask(*scores.shape, device=scores.device)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    output = weights @ v  # (T_q, d_k)

    forward_weights = getattr(att, kind)[layer][0, head]
    forward_output = seen["heads"][0, :, sl]
    q_tokens, k_tokens = row_col_labels(kind, *(token_names(tokenizer, t[0]) for t in (inputs.src, inputs.tgt_in, inputs.tgt_out)))
    top = weights.topk(min(top_k, weights.size(1)), dim=-1)
    return {
        "kind": kind,
        "layer": layer % len(model.encoder_layers if kind == "encoder" else model.decoder_layers),
        "head": head,
        "d_k": module.d_k,
        "source": source,
        "target": target if isinstance(target, str) else tokenizer.decode(target),
        "query_tokens": q_tokens,
        "key_tokens": k_tokens,
        "q": q.tolist(),
        "k": k.tolist(),
        "v": v.tolist(),
        "scores": [  # None where the key is masked (a future token)
            [s if a else None for s, a in zip(rs, ra)] for rs, ra in zip(scores.tolist(), allowed.tolist())
        ],
        "weights": weights.tolist(),
        "output": output.tolist(),
        "top_k": [
            [{"key": int(j), "token": k_tokens[j], "weight": float(w)} for w, j in zip(ws, js)]
            for ws, js in zip(top.values.tolist(), top.indices.tolist())
        ],
        "check": {  # the recomputation against the forward pass
            "weights_max_abs_diff": float((weights - forward_weights).abs().max()),
            "output_max_abs_diff": float((output - forward_output).abs().max()),
        },
    }
