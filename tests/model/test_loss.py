"""The chunked output loss against the reference: the whole logits through F.cross_entropy."""

import pytest
import torch

from qkvmt.model.config import ModelConfig
from qkvmt.model.loss import output_loss, translation_loss
from qkvmt.model.transformer import Transformer


@pytest.mark.parametrize("chunk_rows", [1, 7, 4096])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_output_loss_and_its_gradients_equal_the_reference(chunk_rows, label_smoothing):
    torch.manual_seed(0)
    hidden = torch.randn(3, 9, 16, requires_grad=True)
    weight = (torch.randn(50, 16) * 0.3).requires_grad_()
    tgt_out = torch.randint(3, 50, (3, 9))
    tgt_out[0, 6:] = 0  # pads are ignored
    tgt_out[2, 2:] = 0
    grads = []
    for loss_fn in (
        lambda: translation_loss(hidden @ weight.t(), tgt_out, 0, label_smoothing),
        lambda: output_loss(hidden, weight, tgt_out, 0, label_smoothing, chunk_rows=chunk_rows),
    ):
        hidden.grad = weight.grad = None
        loss = loss_fn()
        (2.5 * loss).backward()  # an upstream gradient other than 1 must scale both
        grads.append((loss.detach(), hidden.grad.clone(), weight.grad.clone()))
    for ref, new in zip(*grads):
        torch.testing.assert_close(new, ref, atol=1e-5, rtol=1e-5)
    assert grads[1][1][0, 6:].abs().sum() == 0  # a pad row gets no gradient


def test_a_tied_model_trains_the_same_under_bf16_autocast():
    """The model's own path (final states, then the tied output layer) against its logits path:
    the same loss and the same gradient for every parameter, the shared embedding included."""
    torch.manual_seed(1)
    model = Transformer(
        ModelConfig(
            vocab_size=40,
            d_model=16,
            n_heads=2,
            encoder_layers=1,
            decoder_layers=2,
            ffn_dim=32,
            dropout=0.0,
            max_positions=16,
        )
    )
    src, tgt_in, tgt_out = (torch.randint(3, 40, (4, 7)) for _ in range(3))
    tgt_out[1, 4:] = 0
    grads = []
    for chunked in (False, True):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if chunked:
                hidden, _ = model(src, tgt_in, project=False)
                loss = output_loss(hidden, model.output.weight, tgt_out, 0, 0.1, chunk_rows=5)
            else:
                loss = translation_loss(model(src, tgt_in)[0], tgt_out, 0, 0.1)
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (ref_loss, ref), (loss, new) = grads
    torch.testing.assert_close(loss, ref_loss, atol=1e-4, rtol=1e-4)
    for name in ref:  # bf16 products: agreement to bf16's precision
        torch.testing.assert_close(new[name], ref[name], atol=2e-3, rtol=2e-2, msg=name)


def test_output_loss_multiplies_a_few_row_counts_whatever_the_number_of_real_tokens():
    """oneDNN builds and caches a bf16 primitive per matmul shape: the number of real tokens,
    which differs in every batch, must not reach the matmuls, or the cache grows all run long."""
    weight = torch.randn(50, 16, requires_grad=True)
    shapes = set()
    with torch.profiler.profile(record_shapes=True) as prof:
        for real in range(1, 130, 4):
            hidden = torch.randn(1, 130, 16, requires_grad=True)
            tgt_out = torch.randint(3, 50, (1, 130))
            tgt_out[0, real:] = 0
            output_loss(hidden, weight, tgt_out, 0, 0.1).backward()
    for event in prof.key_averages(group_by_input_shape=True):
        if event.key == "aten::mm":
            shapes.add(str(event.input_shapes))
    assert shapes and len(shapes) <= 3 * 3  # 64, 128 and 192 rows; three products each


def test_compiled_training_loss_does_not_recompile_for_each_batch_size():
    """benchmark.py compile=true compiles the training loss; on an H200 the chunk loop made a graph
    per batch size until dynamo's recompile limit, and the benchmark gave no compiled figure."""
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    weight = torch.randn(50, 16, requires_grad=True)

    @torch.compile(backend=counting_backend)
    def step(hidden, tgt_out):
        return output_loss(torch.tanh(hidden), weight, tgt_out, 0, 0.1, chunk_rows=8, row_multiple=4)

    counts = []
    for t in range(9, 19):  # ten batch sizes, each a different number of chunks
        torch.manual_seed(t)
        hidden = torch.randn(3, t, 16, requires_grad=True)
        step(hidden, torch.randint(1, 50, (3, t))).backward()
        counts.append(len(graphs))
    assert counts[-1] == counts[2], f"graphs compiled after each batch: {counts}"
    torch.testing.assert_close(  # and what runs is still the loss
        step(hidden, tgt_out := torch.randint(1, 50, (3, 18))),
        output_loss(torch.tanh(hidden), weight, tgt_out, 0, 0.1, chunk_rows=8, row_multiple=4),
    )
