"""The float32 linear product of passes without gradients: oneDNN's where chosen, torch's
otherwise, each checked against F.linear; the choice pinned, measured, or refused."""

import pytest
import torch
import torch.nn.functional as F

from qkvmt.errors import UserError
from qkvmt.model import linear as lin
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer

NO_ONEDNN = lin.unavailable()


@pytest.fixture
def kernel(monkeypatch):
    """Pins QKVMT_FLOAT32_LINEAR to the given value for one test, and forgets the choice after."""

    def pin(value: str) -> lin.Kernel:
        monkeypatch.setenv(lin.SETTING, value)
        lin.float32_kernel.cache_clear()
        return lin.float32_kernel()

    yield pin
    lin.float32_kernel.cache_clear()


def ran_onednn(fn) -> bool:
    """Whether `fn()` called oneDNN's product (torch.profiler names each operator that ran)."""
    with torch.profiler.profile() as prof:
        fn()
    return any(e.name == "mkldnn::_linear_pointwise" for e in prof.events())


def cases():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(512, 256, generator=g)
    b = torch.randn(512, generator=g)
    x3 = torch.randn(5, 7, 256, generator=g)
    return [  # each of lin.SMALL_PRODUCT multiply-adds or more
        (x3, w, b),
        (x3[:, :1], w, None),  # one decoding step, no bias
        (x3.transpose(0, 1), w, b),  # a strided input
        (x3, torch.randn(1024, 256, generator=g)[128:640], b),  # rows of a stacked weight, as w_qkv's
    ]


@pytest.mark.skipif(NO_ONEDNN is not None, reason=f"oneDNN's product: {NO_ONEDNN}")
def test_onednn_product_equals_torchs(kernel):
    assert kernel("onednn").name == "onednn"
    with torch.inference_mode():
        for x, w, b in cases():
            # sums of 256 products of values near 16 in magnitude: float32 order differences of about 1e-5
            torch.testing.assert_close(lin.linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-4)
        assert ran_onednn(lambda: lin.linear(x, w, b))


def test_a_small_product_keeps_torchs_bit_for_bit(kernel):
    """oneDNN's call costs more than such a product: a tiny model's step keeps torch's."""
    kernel("onednn")
    x, w, b = cases()[0]
    x, w = x[..., :16], w[:, :16]  # 35 rows x 16 x 512
    assert x.numel() * w.size(0) < lin.SMALL_PRODUCT
    with torch.inference_mode():
        assert not ran_onednn(lambda: lin.linear(x, w, b))
        assert torch.equal(lin.linear(x, w, b), F.linear(x, w, b))


@pytest.mark.skipif(NO_ONEDNN is not None, reason=f"oneDNN's product: {NO_ONEDNN}")
def test_gradients_and_autocast_keep_torchs_product(kernel):
    kernel("onednn")
    x, w, b = (t.clone().requires_grad_() for t in cases()[0])
    assert not ran_onednn(lambda: lin.linear(x, w, b))
    lin.linear(x, w, b).square().sum().backward()
    grads = [t.grad for t in (x, w, b)]
    ref = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    F.linear(*ref).square().sum().backward()
    for got, want in zip(grads, [t.grad for t in ref]):
        assert torch.equal(got, want)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = lin.linear(x, w, b)
        assert out.dtype == torch.bfloat16 and torch.equal(out, F.linear(x, w, b))


def test_pinned_torch_is_torchs_product_bit_for_bit(kernel):
    assert kernel("torch").name == "torch"
    with torch.inference_mode():
        for x, w, b in cases():
            assert torch.equal(lin.linear(x, w, b), F.linear(x, w, b))
        assert not ran_onednn(lambda: lin.linear(x, w, b))


def test_a_model_decodes_alike_with_either_product(kernel):
    cfg = ModelConfig(vocab_size=300, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64)
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    for p in model.parameters():  # non-zero biases, LayerNorm weights other than 1
        p.data.add_(0.05 * torch.randn_like(p))
    src, tgt = torch.randint(4, 300, (3, 9)), torch.randint(4, 300, (3, 6))
    out = {}
    for name in ("torch", "auto"):
        kernel(name)
        with torch.inference_mode():
            out[name] = model(src, tgt)[0]
    torch.testing.assert_close(out["auto"], out["torch"], rtol=1e-4, atol=1e-4)


def test_the_choice_is_measured_or_refused(kernel):
    measured = kernel("auto")
    assert measured.name in ("torch", "onednn")
    assert measured.why.startswith("measured: oneDNN ") or measured.why == NO_ONEDNN
    with pytest.raises(UserError, match=f"{lin.SETTING}='fastest': use one of auto, torch, onednn"):
        kernel("fastest")
