"""Few matmul shapes: padded linear rows give the same values and gradients as unpadded ones, every
product of a step takes a padded shape, and training steps pad only under CPU bf16 autocast."""

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import qkvmt.training.matmul_rows as matmul_rows
from qkvmt.pipeline.train import train
from qkvmt.training.matmul_rows import PadLinearRows, few_matmul_shapes
from tests.conftest import compose_train, tiny_overrides


def _layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 40), nn.ReLU(), nn.Linear(40, 16, bias=False))


def _values_and_gradients(layers, x, mode):
    x = x.clone().requires_grad_()
    with mode:
        out = layers(x)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    grads = [x.grad, *(p.grad for p in layers.parameters())]
    layers.zero_grad()
    return out.detach(), grads


def test_padded_rows_change_no_value_and_no_gradient():
    layers = _layers()
    x = torch.randn(3, 7, 16)  # 21 rows: padded to 32
    out, grads = _values_and_gradients(layers, x, contextlib.nullcontext())
    padded_out, padded_grads = _values_and_gradients(layers, x, PadLinearRows(16))
    assert padded_out.shape == out.shape
    torch.testing.assert_close(padded_out, out)
    for padded, plain in zip(padded_grads, grads):
        torch.testing.assert_close(padded, plain)


def test_every_product_of_a_step_takes_a_padded_shape():
    """Forward and both backward products (input and weight gradients) of every layer."""
    layers = _layers()
    x = torch.randn(5, 5, 16, requires_grad=True)  # 25 rows
    with torch.profiler.profile(record_shapes=True) as prof:
        with PadLinearRows(32):
            out = layers(x)
        out.sum().backward()
    products = [e.input_shapes for e in prof.events() if e.name in ("aten::addmm", "aten::mm")]
    assert len(products) == 6  # 2 layers x (forward, input gradient, weight gradient)
    for shapes in products:
        dims = [
            d for matrix in shapes if len(matrix) == 2 for d in matrix
        ]  # the two matrices, not addmm's bias or scalars
        assert 32 in dims and set(dims) <= {16, 40, 32}  # the padded rows, as M or as a weight gradient's K; never 25


def test_steps_pad_only_under_cpu_bf16_autocast():
    assert not isinstance(few_matmul_shapes(256), PadLinearRows)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert isinstance(few_matmul_shapes(256), PadLinearRows)
        assert not isinstance(few_matmul_shapes(0), PadLinearRows)
    with torch.autocast("cpu", dtype=torch.float16):
        assert not isinstance(few_matmul_shapes(256), PadLinearRows)


@pytest.mark.slow
def test_training_steps_compute_on_padded_rows(corpus, tmp_path, monkeypatch):
    """Through train(), under bf16-mixed: the linear layers of training, validation and test steps
    see rows padded to module.linear_row_multiple."""
    seen = []

    class Recording(PadLinearRows):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is F.linear:
                seen.append(self.multiple)
            return super().__torch_function__(func, types, args, kwargs)

    monkeypatch.setattr(matmul_rows, "PadLinearRows", Recording)
    overrides = [*tiny_overrides(corpus, tmp_path / "run", steps=2, val_every=2), "trainer.precision=bf16-mixed"]
    metrics = train(compose_train(*overrides, "module.linear_row_multiple=64"))
    assert seen and set(seen) == {64} and metrics["test_bleu"] is not None


def test_the_module_takes_its_logits_in_chunks_of_loss_chunk_rows(monkeypatch):
    from qkvmt.model.config import ModelConfig
    from qkvmt.training import module as module_file

    chunks = []
    real = module_file.output_loss
    monkeypatch.setattr(module_file, "output_loss", lambda *a, **k: chunks.append(k["chunk_rows"]) or real(*a, **k))
    cfg = ModelConfig(vocab_size=20, d_model=16, n_heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=32)
    module = module_file.TranslationModule(cfg, tokenizer=None, optimizer=torch.optim.Adam, loss_chunk_rows=128)
    tokens = torch.randint(4, 20, (2, 5))
    module.loss({"src": tokens, "tgt_in": tokens, "tgt_out": tokens})
    assert chunks == [128]
