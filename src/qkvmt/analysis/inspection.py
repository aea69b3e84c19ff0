"""Q, K and V of one attention head, as the model computed them for one sentence pair.

For head h of a layer, with x the queries' input and y the keys' input (y = x in self-attention,
the encoder output in cross-attention):

    Q = x W_Q[:, h]   K = y W_K[:, h]   V = y W_V[:, h]          (each T × d_k)
    scores = Q Kᵀ / √d_k      weights = softmax(scores + mask)      output = weights V

With rotary positions (model.positions=rotary), Q and K of self-attention are shown rotated,
as the scores use them.

Everything is read from one traced forced pass (qkvmt.analysis.trace): Q, K, V, the scores and
the weights as the layer's kernel computed them, and the head's output as W_O received it; the
output weights·V is checked against the latter. `inspect_head` computes a `HeadPass`; the
inspector's page and inspect.json draw it (qkvmt.results.inspection.HeadInspection).
"""

from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer

from qkvmt.analysis.forced import pair_ids, row_col_labels, target_names, token_names
from qkvmt.analysis.trace import KINDS, attention_modules, trace
from qkvmt.analysis.value_norms import transformed_values
from qkvmt.errors import UserError
from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.setting_types import as_typed


@dataclass
class TopKey:
    key: int  # the key's position
    token: str
    weight: float


@dataclass
class HeadPass:
    """One head's queries, keys and values for one sentence pair, and what it made of them."""

    kind: str  # encoder, decoder or cross
    layer: int  # 0-based
    head: int
    d_k: int
    source: str
    target: str
    query_tokens: list[str]
    key_tokens: list[str]
    q: np.ndarray  # (T_q, d_k): x W_Q of this head
    k: np.ndarray  # (T_k, d_k)
    v: np.ndarray  # (T_k, d_k)
    scores: np.ndarray  # (T_q, T_k): Q Kᵀ / √d_k, -inf where the key is masked (a future token)
    weights: np.ndarray  # (T_q, T_k): softmax of the scores
    output: np.ndarray  # (T_q, d_k): weights V
    value_norms: np.ndarray  # (T_k,): ‖W_O^h v_j‖, what key j's value adds to the residual stream per unit of weight
    top_k: list[list[TopKey]]  # each query's most attended keys, heaviest first
    check: dict[str, float]  # the largest differences from the model's own forward pass

    @property
    def contributions(self) -> np.ndarray:
        """(T_q, T_k): ‖α_ij W_O^h v_j‖, how much key j's value adds to query i (Kobayashi et al. 2020)."""
        return self.weights * self.value_norms[None, :]

    def query(self, row: int) -> dict:
        """One query's walk through the head (bertviz's neuron view): its vector q, every key k_j
        and q·k_j, the scaled score (None where masked), the softmax weight α_j, every value v_j,
        α_j v_j and ‖α_j W_O^h v_j‖, and the output Σ_j α_j v_j."""
        if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < len(self.query_tokens):
            raise UserError(
                f"row={row!r}: this {self.kind} attention has {len(self.query_tokens)} queries "
                f"(0..{len(self.query_tokens) - 1})"
            )
        weights = self.weights[row]
        return {
            "row": row,
            "token": self.query_tokens[row],
            "q": self.q[row],
            "k": self.k,
            "dots": self.k @ self.q[row],
            "scores": [None if np.isneginf(s) else s for s in self.scores[row].tolist()],
            "weights": weights,
            "v": self.v,
            "weighted": weights[:, None] * self.v,
            "contributions": self.contributions[row],
            "output": self.output[row],
        }


def checked_kind(kind, name: str = "kind") -> str:
    """`kind`, if it names a kind of attention (KINDS), else a UserError naming them and the
    setting `name`."""
    if kind not in KINDS:
        raise UserError(f"{name}={as_typed(kind)}: use one of {', '.join(KINDS)}")
    return kind


def attention_module(model: Transformer, kind: str, layer: int) -> MultiHeadAttention:
    """The attention module of `kind` in `layer` (negative: from the end); a bad kind or layer is
    a UserError naming what there is."""
    modules = attention_modules(model, checked_kind(kind))
    if not -len(modules) <= layer < len(modules):
        raise UserError(
            f"layer={layer}: the {kind} has {len(modules)} layers (0..{len(modules) - 1}, or -1 for the last)"
        )
    return modules[layer]


@torch.no_grad()
def inspect_head(
    model: Transformer,
    tokenizer: Tokenizer,
    source: str,
    target: str | list[int],
    kind: str,
    layer: int,
    head: int,
    top_k: int = 3,
) -> HeadPass:
    """Head `head` of the `kind` attention in `layer` (negative: from the end) in the forced pass
    of (source, target), target text or the ids decoding generated; top_k keys per query."""
    c = model.cfg
    module = attention_module(model, kind, layer)
    if not -module.n_heads <= head < module.n_heads:
        raise UserError(f"head={head}: layers have {module.n_heads} heads (0..{module.n_heads - 1})")
    head %= module.n_heads
    device = next(model.parameters()).device
    inputs = build_inputs(*([ids] for ids in pair_ids(tokenizer, source, target)), c.specials, c.max_positions)

    traced = trace(model, inputs.src.to(device), inputs.tgt_in.to(device))
    site = traced[kind, layer % len(traced.layers[kind])]
    layer = site.layer
    q, k, v, scores, weights = (getattr(site, name)[0, head] for name in ("q", "k", "v", "scores", "weights"))
    output = weights @ v  # (T_q, d_k)
    forward_output = site.heads[0, :, head * module.d_k : (head + 1) * module.d_k]  # (T_q, d_k): W_O's input
    added = transformed_values(site)[0, head].norm(dim=-1)  # (T_k,): ‖W_O^h v_j‖
    q_tokens, k_tokens = row_col_labels(
        kind,
        token_names(tokenizer, inputs.src[0]),
        target_names(tokenizer, inputs.tgt_in[0]),
        target_names(tokenizer, inputs.tgt_out[0]),
    )
    top = weights.topk(min(top_k, weights.size(1)), dim=-1)
    as_array = lambda t: t.float().cpu().numpy()  # noqa: E731
    return HeadPass(
        kind=kind,
        layer=layer,
        head=head,
        d_k=module.d_k,
        source=source,
        target=target if isinstance(target, str) else tokenizer.decode(target),
        query_tokens=q_tokens,
        key_tokens=k_tokens,
        q=as_array(q),
        k=as_array(k),
        v=as_array(v),
        scores=as_array(scores),
        weights=as_array(weights),
        output=as_array(output),
        value_norms=as_array(added),
        top_k=[
            [TopKey(int(j), k_tokens[j], float(w)) for w, j in zip(ws, js)]
            for ws, js in zip(top.values.tolist(), top.indices.tolist())
        ],
        check={"output_max_abs_diff": float((output - forward_output).abs().max())},  # weights·V against W_O's input
    )
