"""Q, K and V of one attention head, as the model computed them for one sentence pair.

For head h of a layer, with x the queries' input and y the keys' input (y = x in self-attention,
the encoder output in cross-attention):

    Q = x W_Q[:, h]   K = y W_K[:, h]   V = y W_V[:, h]          (each T × d_k)
    scores = Q Kᵀ / √d_k      weights = softmax(scores + mask)      output = weights V

With rotary positions (model.positions=rotary), Q and K of self-attention are shown rotated,
as the scores use them.

Everything is read from one traced forced pass (qkvmt.analysis.trace): Q, K, V, the scores and
the weights as the layer's kernel computed them, and the head's output as W_O received it; the
output weights·V is checked against the latter.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from qkvmt.analysis.forced import pair_ids, row_col_labels, token_names
from qkvmt.analysis.trace import KINDS, attention_modules, trace
from qkvmt.analysis.value_norms import transformed_values
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.views.html import check_labels, escape, page, texts_html, vectors_html
from qkvmt.views.result import Result


@dataclass
class TopKey:
    key: int  # the key's position
    token: str
    weight: float


@dataclass
class HeadInspection(Result):
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

    def to_dict(self) -> dict:
        """inspect.json."""
        return {
            "kind": self.kind,
            "layer": self.layer,
            "head": self.head,
            "d_k": self.d_k,
            "source": self.source,
            "target": self.target,
            "query_tokens": self.query_tokens,
            "key_tokens": self.key_tokens,
            "q": self.q.tolist(),
            "k": self.k.tolist(),
            "v": self.v.tolist(),
            "scores": [[None if np.isneginf(s) else s for s in row] for row in self.scores.tolist()],  # None: masked
            "weights": self.weights.tolist(),
            "output": self.output.tolist(),
            "value_norms": self.value_norms.tolist(),
            "contributions": self.contributions.tolist(),
            "top_k": [[{"key": t.key, "token": t.token, "weight": t.weight} for t in row] for row in self.top_k],
            "check": self.check,
        }

    def html(self) -> str:
        """The weights map (hover: score and weight), each query's top keys, the vectors."""
        q_tokens, k_tokens = self.query_tokens, self.key_tokens
        weights, scores = np.asarray(self.weights, dtype=float), np.asarray(self.scores, dtype=float)
        check_labels(weights.shape, q_tokens, k_tokens, "weights")
        check_labels(scores.shape, q_tokens, k_tokens, "scores")
        top = "".join(
            f'<li><span class="tok">{escape(q_tokens[qi])}</span> attends to '
            + ", ".join(f'<span class="tok">{escape(t.token)}</span> ({float(t.weight):.3f})' for t in entries)
            + "</li>"
            for qi, entries in enumerate(self.top_k)
        )
        body = (
            f"<p>{escape(self.kind)} attention, layer {escape(self.layer)}, head {escape(self.head)}</p>"
            + texts_html([("source", self.source), ("target", self.target), ("d_k", self.d_k)])
            + '<h2>Weights</h2><div id="weights"></div>'
            + "<h2>What each key adds: ‖α·W_O v‖</h2><p>The weight times the norm of the key's value after the "
            'head\'s slice of W_O: a heavy weight on a small value adds little.</p><div id="contributions"></div>'
            f'<h2>Top keys per query</h2><ol class="topk" start="0">{top}</ol>'
            + vectors_html("Queries (Q)", q_tokens, self.q)
            + vectors_html("Keys (K)", k_tokens, self.k)
            + vectors_html("Values (V)", k_tokens, self.v)
            + vectors_html("Output (weights · V)", q_tokens, self.output)
        )
        data = {
            "page": "inspector",
            "query_tokens": q_tokens,
            "key_tokens": k_tokens,
            "weights": weights,
            "scores": scores,
            "contributions": self.contributions,
        }
        return page("Attention inspector", body, data)

    def files(self) -> dict:
        return {
            "inspect.json": lambda path: write_json(Path(path), self.to_dict()),
            "inspect.html": lambda path: write_text(Path(path), self.html()),
        }


def attention_module(model: Transformer, kind: str, layer: int) -> MultiHeadAttention:
    if kind not in KINDS:
        raise UserError(f"kind={kind!r}: use one of {', '.join(KINDS)}")
    modules = attention_modules(model, kind)
    if not -len(modules) <= layer < len(modules):
        raise UserError(
            f"layer={layer}: the {kind} has {len(modules)} layers (0..{len(modules) - 1}, or -1 for the last)"
        )
    return modules[layer]


@torch.no_grad()
def inspect_head(
    model: Transformer,
    tokenizer,
    source: str,
    target: str | list[int],
    kind: str,
    layer: int,
    head: int,
    top_k: int = 3,
) -> HeadInspection:
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
    forward_output = site.heads[0, :, head * module.d_k : (head + 1) * module.d_k]
    added = transformed_values(site)[0, head].norm(dim=-1)  # (T_k,): ‖W_O^h v_j‖
    q_tokens, k_tokens = row_col_labels(
        kind, *(token_names(tokenizer, t[0]) for t in (inputs.src, inputs.tgt_in, inputs.tgt_out))
    )
    top = weights.topk(min(top_k, weights.size(1)), dim=-1)
    as_array = lambda t: t.float().cpu().numpy()  # noqa: E731
    return HeadInspection(
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
