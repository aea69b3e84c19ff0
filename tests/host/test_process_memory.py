"""This process's memory: the resident-set readings, and oneDNN's primitive cache bounded as a
training process bounds it."""

import mmap
import os
import subprocess
import sys

import pytest

import qkvmt.host.process_memory as process_memory
from qkvmt.host.process_memory import MB, peak_resident_bytes, resident_bytes
from tests.conftest import ROOT

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
child = "from qkvmt.host.process_memory import MB, peak_resident_bytes; print(round(peak_resident_bytes() / MB))"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout)
"""


@linux_only
def test_a_process_started_by_a_larger_one_reports_its_own_peak():
    """ru_maxrss of a process started by (v)fork and exec begins at its parent's high-water mark:
    the benchmark's training process reported the benchmark's 4 GB for its own 0.5 GB."""
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", BIG_PARENT], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 0 < int(r.stdout) < 200  # a bare Python's, not the parent's 1,024 MB


ONEDNN_PROBE = """
import torch
from qkvmt.host.process_memory import bound_onednn_cache
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
    env = {k: v for k, v in os.environ.items() if k != process_memory.ONEDNN_CACHE}
    env |= {"ONEDNN_VERBOSE": "profile_create", "PYTHONPATH": str(ROOT / "src")}
    if user_setting:
        env[process_memory.ONEDNN_CACHE] = user_setting
    r = subprocess.run([sys.executable, "-c", ONEDNN_PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    built = r.stdout.count("create:cache_miss")
    if "onednn_verbose" not in r.stdout:
        pytest.skip("this torch build multiplies bf16 without oneDNN")
    if user_setting:
        assert f"capacity {user_setting}" in r.stdout and built == 80
    else:
        assert f"capacity {process_memory.ONEDNN_CACHE_PRIMITIVES}" in r.stdout and built == 40


def test_a_process_reading_its_memory_imports_nothing_heavy():
    """A process that only measures itself (the benchmark's tokenizing stage, started fresh for each
    corpus size) does not wait seconds for Lightning to import."""
    code = "import sys, qkvmt.host.process_memory; print(*sorted({'torch', 'lightning', 'numpy'} & set(sys.modules)))"
    env = os.environ | {"PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr[-2000:]
