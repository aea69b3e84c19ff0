"""Gradient signals of the source embeddings: how much each source token mattered to each
prediction through the whole model, read from the gradient of its log-probability.

Row t, the position that predicts tgt_out[t], scores source token j from e_j (D,), the
`src_embedded` site (the token's embedding with its position), and g_tj = ∂ log p(tgt_out[t]) /
∂e_j:

    input × gradient:       ‖e_j ⊙ g_tj‖₂
    integrated gradients:   |Σ_d (e_j − e0_j) ⊙ ḡ_tj|,   ḡ_tj = ∫₀¹ g_tj(e0 + α(e − e0)) dα
                            (Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks")

The baseline e0 is the source without its tokens: each position's vector alone, the token
embeddings zeroed (with rotary positions, which the embedding does not add, the zero vector).
The zero vector everywhere would be simpler, but it starts the path where every layer norm is
near its singularity (LN(α·x) hardly depends on α until α·x is as small as LN's ε): nearly all of
the change in log p happens in a sliver of α next to 0, which no few-step rule resolves. The
integral is the trapezoid rule on STEPS equal intervals (STEPS + 1 gradients, α = 0 and 1
included). Row t's signed attributions sum to log p_t(e) − log p_t(e0) (completeness) up to the
rule's error, which shrinks as STEPS grows; `integrated_gradients` returns them signed, the
maps show their size.

Every row depends on the same source, so one backward pass of their summed log-probabilities
would mix their gradients. Each point of the path is run forward once (torch.func.vjp), and each
row's backward pass starts from its log-probability's gradient at its own final state, the rows'
passes batched together (torch.func.vmap); row t's decoder runs only to target position t
(causal: no later position changes it). Attention runs its explicit path (need_weights), whose
backward vmap batches; it differs from the fused kernel's by float rounding only.
Both signals are of the whole model (one map, L = 1) and of cross-attention only. Their cost
grows with the rows, so they compute only the context's rows when it names some (the others
are NaN): faithfulness scores a few target tokens of a sentence, the explorer's curves one.
"""

import torch
from torch import Tensor

from qkvmt.analysis.signals import Context, Signal, SignalMaps, register
from qkvmt.analysis.trace import edited
from qkvmt.model.transformer import Transformer

STEPS = 20
COPIES = 256  # path points × rows per backward pass: bounds the memory a long sentence's path takes


@torch.no_grad()  # of the parameters: torch.func takes the gradients of the embeddings itself
def row_gradients(
    model: Transformer, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, embedded: Tensor, rows: Tensor
) -> Tensor:
    """For K source embeddings (K, S, D) of one sentence (src, tgt_in, tgt_out: (1, ·) ids),
    the gradient (K, R, S, D) of each of the R distinct `rows` t's log p(tgt_out[t]) with respect to each."""
    k, device = embedded.size(0), src.device
    rows, src, src_mask = rows.to(device), src.expand(k, -1), model.source_mask(src).expand(k, -1, -1, -1)

    def encoded(e: Tensor) -> Tensor:
        with edited(model, {"src_embedded": lambda _: e}):
            return model.encode(src, need_weights=True)[0]

    def final_states(memory: Tensor, end: int) -> Tensor:
        return model.decode(tgt_in[:, :end].expand(k, -1), memory, src_mask, need_weights=True, project=False)[0]

    grads = torch.empty(rows.numel(), *embedded.shape, dtype=embedded.dtype, device=device)
    memory, encoder_vjp = torch.func.vjp(encoded, embedded)
    # Causal: row t reads target positions 0..t alone, so rows taken in order need the decoder
    # only up to the last one's position in each part.
    for part in rows.argsort().split(max(1, COPIES // k)):
        at, n = rows[part], part.numel()
        states, decoder_vjp = torch.func.vjp(lambda m, end=int(at.max()) + 1: final_states(m, end), memory)
        with torch.enable_grad():
            h = states[:, at].detach().requires_grad_()  # (K, n, D)
            log_p = model.output(h).float().log_softmax(-1)[:, torch.arange(n), tgt_out[0, at]]  # (K, n)
            (seed,) = torch.autograd.grad(log_p.sum(), h)
        each = torch.zeros(n, *states.shape, dtype=states.dtype, device=device)  # row i's at its position alone
        each[torch.arange(n), :, at] = seed.transpose(0, 1)
        (grads[part],) = torch.func.vmap(encoder_vjp)(*torch.func.vmap(decoder_vjp)(each))
    return grads.transpose(0, 1)


def every_row(tgt_in: Tensor, rows: Tensor | None) -> Tensor:
    """The rows asked for, or all of the target's when none are named."""
    return torch.arange(tgt_in.size(1)) if rows is None else rows


def input_x_gradient(
    model: Transformer, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, e: Tensor, rows: Tensor | None = None
) -> Tensor:
    """‖e_j ⊙ g_tj‖ (R, S) for the source embedding e (1, S, D), at `rows` (default: all T)."""
    return (e * row_gradients(model, src, tgt_in, tgt_out, e, every_row(tgt_in, rows))[0]).norm(dim=-1)


def baseline(model: Transformer, e: Tensor) -> Tensor:
    """e0 for the source embedding e (1, S, D): its positions without its tokens."""
    positions = model.src_embed.positions  # (max_positions, D), None with rotary positions
    return torch.zeros_like(e) if positions is None else positions[: e.size(1)].to(e.dtype).expand_as(e)


def integrated_gradients(
    model: Transformer,
    src: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    e: Tensor,
    steps: int = STEPS,
    rows: Tensor | None = None,
) -> Tensor:
    """Signed attributions Σ_d (e_j − e0_j) ⊙ ḡ_tj (R, S) for the source embedding e (1, S, D), at
    `rows` (default: all T); row t sums to about log p_t(e) − log p_t(e0)."""
    e0 = baseline(model, e)
    alphas = torch.linspace(0, 1, steps + 1, dtype=e.dtype, device=e.device)
    weights = torch.full_like(alphas, 1 / steps)
    weights[[0, -1]] /= 2  # the trapezoid rule
    path = e0 + alphas[:, None, None] * (e - e0)  # (steps + 1, S, D)
    g = row_gradients(model, src, tgt_in, tgt_out, path, every_row(tgt_in, rows))  # (steps + 1, R, S, D)
    mean_gradient = torch.einsum("k,ktsd->tsd", weights, g)
    return ((e - e0) * mean_gradient).sum(-1)


def sentence(context: Context) -> tuple:
    """The model, the ids (1, ·) and the source embedding (1, S, D) of batch row 0."""
    traced = context.traced
    return context.model, traced.src[:1], traced.tgt[:1], context.tgt_out[:1], traced.src_embedded[:1].detach()


def rows_of(context: Context) -> Tensor | None:
    return None if context.rows is None else torch.tensor(sorted(set(context.rows)), dtype=torch.long)


def maps(context: Context, scores: Tensor, rows: Tensor | None) -> dict[str, SignalMaps]:
    """scores (R, S) at `rows` -> the one map (1, T, S), NaN at the rows not computed."""
    out = scores.float().cpu()
    if rows is not None:
        out = torch.full((context.tgt_out.size(1), scores.size(1)), float("nan")).index_copy_(0, rows, out)
    return {"cross": SignalMaps(None, out[None].numpy())}


def x_gradient_signal(context: Context) -> dict[str, SignalMaps]:
    rows = rows_of(context)
    return maps(context, input_x_gradient(*sentence(context), rows=rows), rows)


def integrated_signal(context: Context) -> dict[str, SignalMaps]:
    rows = rows_of(context)
    return maps(context, integrated_gradients(*sentence(context), rows=rows).abs(), rows)


register(Signal("input_x_gradient", "input × gradient", ("cross",), x_gradient_signal, cost="passes"))
register(Signal("integrated_gradients", "integrated gradients", ("cross",), integrated_signal, cost="passes"))
