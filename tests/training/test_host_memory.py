"""Host memory: the resident-set readings, the estimate of a CPU run's need, and the warning a
short machine prints first."""

import logging
import mmap
import os
import subprocess
import sys

import pytest
import torch

import qkvmt.training.host_memory as host_memory
import qkvmt.training.torch_build as torch_build
from qkvmt.model.config import ModelConfig
from qkvmt.pipeline.train import train
from qkvmt.training.host_memory import MB, peak_resident_bytes, resident_bytes, training_need_mb, warn_if_short
from tests.conftest import ROOT, compose_train, tiny_overrides

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")


@linux_only
def test_resident_set_and_its_peak_follow_what_the_process_touches():
    before = resident_bytes()
    with mmap.mmap(-1, 64 * MB) as block:  # fresh pages, not a free block the heap already holds
        block.write(b"x" * (64 * MB))
        during = resident_bytes()
        assert during - before >= 60 * MB
        assert peak_resident_bytes() >= during - 4 * MB  # the high-water mark is updated lazily


BIG_PARENT = """
import mmap, subprocess, sys
with mmap.mmap(-1, 1024 * 2**20) as block:  # the parent's peak: 1 GB touched, then given back
    block.write(b"x" * (1024 * 2**20))
child = "from qkvmt.training.host_memory import MB, peak_resident_bytes; print(round(peak_resident_bytes() / MB))"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout)
"""


@linux_only
def test_a_process_started_by_a_larger_one_reports_its_own_peak():
    """ru_maxrss of a process started by (v)fork and exec begins at its parent's high-water mark:
    the benchmark's training process reported the benchmark's 4 GB for its own 0.5 GB."""
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", BIG_PARENT], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 50 < int(r.stdout) < 900  # its imports (torch, Lightning), not the parent's 1,024 MB


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


ONEDNN_PROBE = """
import torch
from qkvmt.training.host_memory import bound_onednn_cache
print("capacity", bound_onednn_cache())
w = torch.randn(64, 64)
with torch.autocast("cpu", dtype=torch.bfloat16):
    for _ in range(2):
        for rows in range(64, 104):  # 40 shapes, each built once and, if the cache holds them, found the second time
            torch.nn.functional.linear(torch.randn(rows, 64), w)
"""


@pytest.mark.parametrize("user_setting", [None, "8"])
def test_a_training_process_sets_onednn_cache_unless_the_user_set_it(user_setting):
    """bound_onednn_cache, run after `import torch` as train() runs it, is what oneDNN uses:
    with ours (512), 40 shapes met twice are built 40 times; with the user's 8, 80 times."""
    env = {k: v for k, v in os.environ.items() if k != host_memory.ONEDNN_CACHE}
    env |= {"ONEDNN_VERBOSE": "profile_create", "PYTHONPATH": str(ROOT / "src")}
    if user_setting:
        env[host_memory.ONEDNN_CACHE] = user_setting
    r = subprocess.run([sys.executable, "-c", ONEDNN_PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    built = r.stdout.count("create:cache_miss")
    if "onednn_verbose" not in r.stdout:
        pytest.skip("this torch build multiplies bf16 without oneDNN")
    if user_setting:
        assert f"capacity {user_setting}" in r.stdout and built == 80
    else:
        assert f"capacity {host_memory.ONEDNN_CACHE_PRIMITIVES}" in r.stdout and built == 40
