"""The translation loss: label-smoothed cross-entropy over the real (non-pad) target tokens.

`translation_loss` takes logits (B, T, V), as any model gives them (the benchmark's peers).
`output_loss` is what training runs: it takes the decoder's final states and the output
layer's weight, and computes the logits, the loss and its gradients chunk by chunk over the
real tokens, so the (tokens × vocabulary) logits, their float32 copy, their log-softmax and
its gradient never exist whole. Those buffers were what held a tiny model's training at
2-3 GB a process; the FLOPs are the same, and pad rows are skipped.

The rows are taken in a multiple of `row_multiple`, the last ones masked out. On a CPU only the
real tokens are taken: their number differs in every batch, and oneDNN builds and caches a bf16
matmul primitive per shape, so three new shapes a step grew its cache (up to 1,024 primitives)
for as long as training ran, and the CPU recipe's processes with it (3.5 GB each after 4
minutes). On a GPU every row is taken and the pads weigh nothing: picking the real ones would
make the host wait for the device to count them, every step, and the GPU idle meanwhile.
Compiled (torch.compile), the loss is the plain one over the whole logits: the compiler fuses
the softmax and the loss, and a GPU has the memory.

    loss = mean over real tokens t of  (1 - ε) · -log p_t(y_t)  +  ε · mean_v -log p_t(v)
    ∂loss/∂logits_t = (softmax_t - (1 - ε) · onehot(y_t) - ε / V) / n_real
"""

import torch
import torch.nn.functional as F
from torch import Tensor

CHUNK_ROWS = 2048  # real tokens whose logits exist at once
ROW_MULTIPLE = 64  # the real tokens are taken in a multiple of this many rows


def translation_loss(logits: Tensor, tgt_out: Tensor, pad_id: int, label_smoothing: float) -> Tensor:
    """Label-smoothed cross-entropy over the non-pad target tokens; logits (B, T, V), in float32."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(), tgt_out.flatten(), ignore_index=pad_id, label_smoothing=label_smoothing
    )


def output_loss(
    hidden: Tensor,
    weight: Tensor,
    tgt_out: Tensor,
    pad_id: int,
    label_smoothing: float,
    chunk_rows: int = CHUNK_ROWS,
    row_multiple: int = ROW_MULTIPLE,
) -> Tensor:
    """translation_loss(hidden @ weightᵀ, ...) without the whole logits: hidden (B, T, D) the
    decoder's final states, weight (V, D) the output layer's."""
    if torch.compiler.is_compiling():  # a chunk loop over data-dependent rows would recompile per batch
        return translation_loss(hidden @ weight.t(), tgt_out, pad_id, label_smoothing)
    x, y = hidden.flatten(0, 1), tgt_out.flatten()  # (B·T, D), (B·T,)
    if x.device.type == "cpu":  # the host holds the data: no device to wait for, and no pad products
        real = y != pad_id
        x, y = x[real], y[real]
    extra = -x.size(0) % row_multiple
    x, y = F.pad(x, (0, 0, 0, extra)), F.pad(y, (0, extra), value=pad_id)  # pad rows add nothing, get no gradient
    return _OutputCrossEntropy.apply(x, weight, y, pad_id, float(label_smoothing), chunk_rows)


class _OutputCrossEntropy(torch.autograd.Function):
    """The loss is a scalar, so its gradients are computed chunk by chunk in forward and only
    scaled in backward. Under autocast the products run in its dtype, as the output layer's
    would, and the softmax in float32, as translation_loss's does."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, targets: Tensor, pad_id: int, eps: float, chunk: int) -> Tensor:
        """Rows whose target is pad_id count for nothing. Nothing here reads a tensor's value on
        the host: a GPU runs the whole step without waiting for it."""
        v = weight.size(0)
        keep = (targets != pad_id).float()  # (rows,)
        n = keep.sum().clamp(min=1)
        total = torch.zeros((), dtype=torch.float32, device=x.device)
        grad_x = torch.empty_like(x)
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=x.device)
        for start in range(0, x.size(0), chunk):
            xs, ys, ks = x[start : start + chunk], targets[start : start + chunk], keep[start : start + chunk]
            logits = xs @ weight.t()  # (c, V)
            logp = logits.float().log_softmax(-1)
            nll = -logp.gather(1, ys[:, None])[:, 0]
            total += (((1 - eps) * nll - eps * logp.mean(-1)) * ks).sum()
            g = logp.exp_().sub_(eps / v)  # softmax - ε/V, in place of logp
            g[torch.arange(len(ys), device=x.device), ys] -= 1 - eps
            g = g.mul_((ks / n)[:, None]).to(logits.dtype)
            grad_x[start : start + chunk] = g @ weight
            grad_w += (g.t() @ xs).float()
        ctx.save_for_backward(grad_x, grad_w)
        ctx.weight_dtype = weight.dtype
        return total / n

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        grad_x, grad_w = ctx.saved_tensors
        return grad_x * grad_out, (grad_w * grad_out).to(ctx.weight_dtype), None, None, None, None
