"""Precision follows the hardware: bf16 only where it is native, an explicit choice always wins."""

import pytest
import torch

from qkvmt.host import hardware
from qkvmt.host.hardware import Hardware, choose_precision, cpu_native_bf16, detect

AVX2_CPU = Hardware("cpu", "AMD EPYC", "AVX2", cpu_native_bf16=False)
AMX_CPU = Hardware("cpu", "Intel Xeon (Sapphire Rapids)", "AVX512", cpu_native_bf16=True)
H100 = Hardware("cuda", "NVIDIA H100", "AVX2", cpu_native_bf16=False, gpu_bf16=True)
V100 = Hardware("cuda", "Tesla V100", "AVX2", cpu_native_bf16=False, gpu_bf16=False)


@pytest.mark.parametrize(
    "hw, expected", [(AVX2_CPU, "32-true"), (AMX_CPU, "bf16-mixed"), (H100, "bf16-mixed"), (V100, "16-mixed")]
)
def test_auto_picks_the_fastest_native_precision(hw, expected):
    precision, why = choose_precision("auto", hw)
    assert precision == expected
    assert why  # the first lines of a run print it


@pytest.mark.parametrize("hw", [AVX2_CPU, AMX_CPU, H100])
def test_an_explicit_precision_always_wins(hw):
    assert choose_precision("bf16-mixed", hw) == ("bf16-mixed", "set by trainer.precision")
    assert choose_precision(32, hw)[0] == "32"


def fake_amx(monkeypatch):
    """This process's CPU, as an AMX machine reports itself."""
    monkeypatch.setattr(hardware.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)


def test_an_amx_cpu_is_native_bf16_unless_onednn_is_capped(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    fake_amx(monkeypatch)
    assert cpu_native_bf16()
    # ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN off AMX and AVX512-BF16: the machine then trains as an
    # AVX2 one does, and float32 is the right choice there.
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    assert not cpu_native_bf16()
    assert choose_precision("auto", detect("cpu"))[0] == "32-true"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert cpu_native_bf16()


def test_plain_avx512_is_not_native_bf16(monkeypatch):
    # torch.ops.mkldnn._is_mkldnn_bf16_supported() says yes on AVX-512 without BF16, where oneDNN
    # emulates it; the choice must not follow it.
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(hardware.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    assert not cpu_native_bf16()


def test_detect_describes_this_machine():
    hw = detect("cpu")
    assert hw.device == "cpu" and hw.name
    assert hw.cpu_capability == torch.backends.cpu.get_cpu_capability()
    assert set(hw.to_dict()) == {"device", "name", "cpu_capability", "cpu_native_bf16", "gpu_bf16"}
