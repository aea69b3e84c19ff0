"""decode.compute_type: a search in float32, bfloat16 or with int8 weights (qkvmt.decoding.compute_type),
against float32 and against torch's own dynamic quantization; and its refusals, as a user meets them."""

import pytest
import torch
from hydra.utils import instantiate
from torch import nn
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

import qkvmt
import qkvmt.model.linear
from qkvmt.decoding.compute_type import computing
from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.transformer import Transformer
from tests.commandline import run_script, user_error
from tests.conftest import compose_inference
from tests.model.test_weight_casts import model

pytestmark = pytest.mark.filterwarnings("ignore:torch.ao.quantization is deprecated:DeprecationWarning")
DEFAULT = instantiate(compose_inference("translate").decode)  # decode=default, as the commands start from
SOURCES = ["w1 w2 w3 w4", "w7 w3 w9 w12 w5 w6"]
# How far a log-probability may move, as a share of its row's spread (largest - smallest, about 14 here).
# bfloat16 keeps 8 significant bits: each rounding moves a value by up to 2^-9 (0.2%) of it, and the
# roundings of five layers of products add up (measured: 0.7%).
BF16_SHARE = 0.02
# int8 rounds each product's inputs to 7 bits over their largest magnitude (a step of 1/127 of it)
# and each weight to 8 bits of its row's largest: about 1% a product, through five layers (measured: 5%).
INT8_SHARE = 0.1
cpu_bf16 = pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="no native bfloat16 here")


def quantize_dynamic_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x times `weight` as torch.ao.quantization.quantize_dynamic computes an nn.Linear holding it."""
    with (
        torch.inference_mode(False),
        torch.no_grad(),
    ):  # a search's model runs in inference mode; this one cannot be made in it
        layer = nn.Linear(weight.size(1), weight.size(0), bias=bias is not None)
        layer.weight.copy_(weight.clone())
        if bias is not None:
            layer.bias.copy_(bias.clone())
        quantized = quantize_dynamic(nn.Sequential(layer), {nn.Linear: per_channel_dynamic_qconfig})
    return quantized(x)


def log_probs(m: Transformer, src: torch.Tensor, tgt: torch.Tensor, compute_type: str) -> torch.Tensor:
    with torch.inference_mode(), computing(compute_type, src.device):
        logits, _ = m(src, tgt)
    return logits.float().log_softmax(-1)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randint(4, 80, (3, 9), generator=g), torch.randint(4, 80, (3, 7), generator=g)


@pytest.mark.parametrize("compute_type", ["int8", pytest.param("bfloat16", marks=cpu_bf16)])
def test_a_decoder_pass_is_float32s_within_the_types_rounding(compute_type):
    m, (src, tgt) = model(), batch()
    exact = log_probs(m, src, tgt, "float32")
    found = log_probs(m, src, tgt, compute_type)
    assert not torch.equal(found, exact)  # it computed otherwise
    share = {"int8": INT8_SHARE, "bfloat16": BF16_SHARE}[compute_type]
    spread = exact.amax(-1) - exact.amin(-1)
    assert ((found - exact).abs().amax(-1) < share * spread).all()
    assert torch.equal(found.argmax(-1), exact.argmax(-1))  # no near-ties here (model()): the same best tokens


def test_int8_is_torchs_dynamic_quantization_of_every_linear_layer(monkeypatch):
    m, (src, tgt) = model(), batch()
    found = log_probs(m, src, tgt, "int8")
    monkeypatch.setattr(qkvmt.model.linear, "int8_linear", quantize_dynamic_linear)
    assert torch.allclose(found, log_probs(m, src, tgt, "float32"), atol=1e-5)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_int8_searches_find_what_torchs_dynamic_quantization_finds(beam_size, monkeypatch):
    m, (src, _) = model(), batch()
    cfg = DecodeConfig(beam_size=beam_size, max_len_b=8)
    found = generate(m, src, DecodeConfig(**{**cfg.__dict__, "compute_type": "int8"}))
    again = generate(m, src, DecodeConfig(**{**cfg.__dict__, "compute_type": "int8"}))  # the packed weights kept
    monkeypatch.setattr(qkvmt.model.linear, "int8_linear", quantize_dynamic_linear)
    reference = generate(m, src, cfg)
    assert [h.tokens for h in found] == [h.tokens for h in again] == [h.tokens for h in reference]
    assert [h.score for h in found] == pytest.approx([h.score for h in reference], abs=1e-4)


def test_int8_weights_are_packed_again_after_an_edit(monkeypatch):
    m, (src, tgt) = model(), batch()
    log_probs(m, src, tgt, "int8")
    with torch.no_grad():
        m.output.weight.mul_(0.5)
        m.decoder_layers[0].cross_attn.w_qkv.bias.add_(1.0)  # rows of a stacked projection, and their bias
    found = log_probs(m, src, tgt, "int8")
    monkeypatch.setattr(qkvmt.model.linear, "int8_linear", quantize_dynamic_linear)
    assert torch.allclose(found, log_probs(m, src, tgt, "float32"), atol=1e-5)


@cpu_bf16
def test_bfloat16_beam_search_runs():
    m, (src, _) = model(), batch()
    found = generate(m, src, DecodeConfig(beam_size=4, max_len_b=8, compute_type="bfloat16"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert [h.tokens for h in found] == [h.tokens for h in generate(m, src, DecodeConfig(beam_size=4, max_len_b=8))]


def test_a_pass_with_gradients_keeps_float32_weights():
    m, (src, tgt) = model(), batch()
    with computing("int8", src.device):
        logits, _ = m(src, tgt)
    assert logits.requires_grad and torch.equal(logits, m(src, tgt)[0])


@pytest.mark.parametrize("compute_type", ["int8", pytest.param("bfloat16", marks=cpu_bf16)])
def test_translate_and_evaluate_take_it_from_the_command_line(folder, compute_type, tmp_path):
    model = qkvmt.load(folder)
    expected = list(model.translate(SOURCES, DEFAULT, compute_type=compute_type))
    given = [f"ckpt_path={folder}", f"decode.compute_type={compute_type}"]
    r = run_script("translate", *given, stdin="".join(s + "\n" for s in SOURCES).encode())
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == expected
    src, out = tmp_path / "s.de", tmp_path / "out"
    src.write_text("".join(s + "\n" for s in SOURCES))
    r = run_script("evaluate", *given, f"src_file={src}", f"ref_file={src}", f"output_dir={out}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "hypotheses.txt").read_text().splitlines() == expected


def refused(folder, tmp_path, compute_type: str) -> str:
    """The error line of translate and of evaluate with decode.compute_type; evaluate leaves no folder."""
    given = [f"ckpt_path={folder}", f"decode.compute_type={compute_type}"]
    line = user_error(run_script("translate", *given, "sentence=w1 w2"))
    src, out = tmp_path / "s.de", tmp_path / "out"
    src.write_text("w1 w2\n")
    assert user_error(run_script("evaluate", *given, f"src_file={src}", f"ref_file={src}", f"output_dir={out}")) == line
    assert not out.exists()
    return line


def test_an_unknown_compute_type_is_one_line(folder, tmp_path):
    assert refused(folder, tmp_path, "float16") == (
        "error: decode.compute_type must be one of float32, bfloat16, int8, got 'float16'"
    )


def test_bfloat16_where_the_cpu_lacks_it_is_one_line(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert refused(folder, tmp_path, "bfloat16") == (
        "error: decode.compute_type=bfloat16: this CPU has no native bfloat16 arithmetic: "
        "use decode.compute_type=float32 (or int8 on a CPU)"
    )


def test_int8_without_an_x86_engine_or_off_the_cpu_is_one_line(folder, tmp_path, monkeypatch):
    if "qnnpack" not in torch.backends.quantized.supported_engines:
        pytest.skip("torch has no engine here other than x86's")
    monkeypatch.setattr(torch.backends.quantized, "engine", "qnnpack")
    assert refused(folder, tmp_path, "int8") == (
        "error: decode.compute_type=int8 needs one of torch's quantized engines x86, fbgemm, onednn "
        "(torch's engine here is qnnpack): use decode.compute_type=float32"
    )
    with pytest.raises(qkvmt.UserError, match=r"^decode.compute_type=int8 computes on a CPU, and the model is on meta"):
        generate(
            model().to("meta"), torch.ones(1, 3, dtype=torch.long, device="meta"), DecodeConfig(compute_type="int8")
        )
