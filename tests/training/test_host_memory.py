"""Host memory in training: the estimate of a CPU run's need, and the warning a short machine
prints first."""

import logging

import pytest
import torch

import qkvmt.training.host_memory as host_memory
import qkvmt.training.torch_build as torch_build
from qkvmt.host.process_memory import MB
from qkvmt.model.config import ModelConfig
from qkvmt.pipeline.train import train
from qkvmt.training.host_memory import training_need_mb, warn_if_short
from tests.conftest import compose_train, tiny_overrides


def test_the_estimate_grows_with_the_batch_and_the_model():
    small = ModelConfig(vocab_size=6000, d_model=192, n_heads=4, encoder_layers=3, decoder_layers=3, ffn_dim=768)
    base = training_need_mb(small, 2048)
    assert host_memory.PROCESS_BASE_MB < base < training_need_mb(small, 4096)
    bigger = ModelConfig(vocab_size=32000, d_model=512, encoder_layers=6, decoder_layers=6, ffn_dim=2048)
    assert training_need_mb(bigger, 2048) > base


def test_a_cuda_build_counts_its_libraries_and_without_a_gpu_says_how_to_shed_them(monkeypatch):
    small = ModelConfig(vocab_size=6000, d_model=192, n_heads=4, encoder_layers=3, decoder_layers=3, ffn_dim=768)
    monkeypatch.setattr(torch.version, "cuda", None)
    cpu_build = training_need_mb(small, 2048)
    assert torch_build.idle_cuda_build() is None
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert training_need_mb(small, 2048) == cpu_build + torch_build.CUDA_BUILD_MB
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert torch_build.CPU_BUILD in torch_build.idle_cuda_build()
    monkeypatch.setattr(host_memory, "available_bytes", lambda: 2 * 2**30)
    assert torch_build.CPU_BUILD in warn_if_short(1500, 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine that trains on its CPU
    assert torch_build.idle_cuda_build() is None and torch_build.CPU_BUILD not in warn_if_short(1500, 2)


def test_a_short_machine_is_told_how_to_lower_the_need(monkeypatch):
    monkeypatch.setattr(host_memory, "available_bytes", lambda: 2 * 2**30)
    assert warn_if_short(800, 2) is None  # 1.6 GB of 2 GB: enough
    text = warn_if_short(1500, 2)
    assert "2.0 GB of memory available" in text and "2.9 GB" in text
    assert "data.max_tokens" in text and "trainer.devices=1" in text
    assert "trainer.devices=1" not in warn_if_short(3000, 1)  # one process already
    monkeypatch.setattr(host_memory, "available_bytes", lambda: None)  # cannot tell: no warning
    assert warn_if_short(10**6, 2) is None


@pytest.mark.slow
def test_training_on_a_short_machine_warns_in_its_first_lines(corpus, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(host_memory, "available_bytes", lambda: 100 * MB)
    monkeypatch.setattr(
        torch.version, "cuda", "13.0"
    )  # as a plain `pip install torch` brings: a CUDA build, no GPU here
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with caplog.at_level(logging.INFO):
        train(compose_train(*tiny_overrides(corpus, tmp_path / "run", steps=2, val_every=2)))
    lines = [r.getMessage() for r in caplog.records]
    warned = next(i for i, line in enumerate(lines) if "may be killed" in line)
    assert "data.max_tokens" in lines[warned] and torch_build.CPU_BUILD in lines[warned]
    assert any(torch_build.CPU_BUILD in line and "no usable GPU" in line for line in lines[:warned])
    assert any(line.startswith("precision ") for line in lines[:warned])  # beside the first lines
    assert not any(line.startswith("testing ") for line in lines[:warned])  # not after training
