"""The torch build: triton is skipped before Lightning imports it where no GPU could run it, and
kept where a GPU could or where it is already imported; the CUDA libraries' idle file pages are
dropped from a process's resident set where no GPU could use them, and nothing else is."""

import ctypes
import mmap
import os
import re
import subprocess
import sys
import types

import pytest
import torch

import qkvmt.training.torch_build as torch_build
from qkvmt.cli.table import COMMANDS
from qkvmt.training.host_memory import ReleaseFreedHostMemory
from qkvmt.training.torch_build import skip_idle_triton
from tests.conftest import ROOT

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

# A stand-in for an installed triton that says when something imports it, then fails as a triton
# without its GPU libraries would, so that torch goes on without it.
FAKE_TRITON = "import os\nopen(os.environ['TRITON_IMPORTED'], 'w').close()\nraise ImportError('a stand-in')\n"

# What a subcommand's process imports, in its order, up to Lightning and torch._dynamo: argv[1]
# is Python that imports what the command does before it runs.
IMPORTS = """
import sys
exec(sys.argv[1])
import lightning, torch._dynamo
print("skipped" if sys.modules.get("triton", "absent") is None else "not skipped")
"""


def _run(tmp_path, code: str):
    (tmp_path / "triton").mkdir(exist_ok=True)
    (tmp_path / "triton" / "__init__.py").write_text(FAKE_TRITON)
    marker = tmp_path / "imported"
    marker.unlink(missing_ok=True)
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src"), str(ROOT)]),
        "TRITON_IMPORTED": str(marker),
        "CUDA_VISIBLE_DEVICES": "",
    }
    r = subprocess.run([sys.executable, "-c", IMPORTS, code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip(), marker.exists()


@pytest.mark.slow(reason="a fresh Python per subcommand, each importing Lightning and torch._dynamo")
@pytest.mark.parametrize("name", [c.name for c in COMMANDS.values() if c.before_torch])  # train, benchmark
def test_the_training_subcommands_skip_triton_before_lightning_imports_it(tmp_path, name):
    """With a triton installed and no GPU, `qkvmt train`'s process never imports it (the benchmark
    measures the recipe's process, so it skips it too)."""
    assert _run(tmp_path, f"from qkvmt.cli.main import load; load({name!r})") == ("skipped", False)


@pytest.mark.slow(reason="a fresh Python importing Lightning and torch._dynamo")
def test_without_the_skip_lightning_imports_the_stand_in(tmp_path):
    """The probe's control: a process that imports Lightning without the skip does import triton."""
    assert _run(tmp_path, "import lightning") == ("not skipped", True)


def test_triton_is_kept_with_a_gpu_or_once_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert skip_idle_triton() is False and "triton" not in sys.modules
    already = types.ModuleType("triton")
    monkeypatch.setitem(sys.modules, "triton", already)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert skip_idle_triton() is False and sys.modules["triton"] is already
    monkeypatch.delitem(sys.modules, "triton")
    assert skip_idle_triton() is True and sys.modules["triton"] is None
    assert skip_idle_triton() is True  # asked again: still skipped


PAGE = mmap.PAGESIZE


def _rss_kb(start):
    return next(kb["Rss"] for s, _, _, _, kb in torch_build._mappings() if s == start)


def _address(m):
    """The address of a writable mmap (ctypes needs a writable buffer to export one)."""
    view = ctypes.c_char.from_buffer(m)
    address = ctypes.addressof(view)
    del view  # an exported buffer would keep the mmap from closing
    return address


@linux_only
def test_only_a_files_clean_read_only_pages_are_dropped(tmp_path):
    """Of three private mappings of a file, the read-only one loses its resident pages and still
    reads the file; one written (writable) and one written then made read-only (as the dynamic
    loader leaves relocated tables) keep their pages and what was written."""
    path = tmp_path / "libstandin.so"
    content = bytes(range(256)) * (64 * PAGE // 256)
    path.write_bytes(content)
    libc = ctypes.CDLL("libc.so.6")
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open(path, "rb+") as f:
        clean = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        written = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        relocated = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    mine = {_address(written): written, _address(relocated): relocated}
    for m in mine.values():
        m[::PAGE] = b"\xff" * 64  # a page of its own in every page
    relocated_at = _address(relocated)
    assert libc.mprotect(relocated_at, len(content), mmap.PROT_READ) == 0
    assert clean[:] == content  # every page resident
    clean_at = next(
        s
        for s, _, perms, p, kb in torch_build._mappings()
        if p == str(path) and perms.startswith("r--") and s != relocated_at
    )
    held = {s: _rss_kb(s) for s in [clean_at, *mine]}
    assert held[clean_at] == 64 * PAGE // 1024

    dropped = torch_build.drop_file_pages(lambda p: p == str(path))

    assert dropped == held[clean_at] * 1024 and _rss_kb(clean_at) == 0
    assert all(_rss_kb(s) == held[s] for s in mine)
    assert clean[:] == content  # read again from the page cache
    for m in mine.values():
        assert m[::PAGE] == b"\xff" * 64 and m[1:PAGE] == content[1:PAGE]
    for m in [clean, written, relocated]:
        m.close()
    assert torch_build.drop_file_pages(lambda p: p == str(path)) == 0  # unmapped: nothing left


@pytest.mark.parametrize(
    "path, cuda",
    [
        ("/v/lib/python3.11/site-packages/nvidia/cu13/lib/libcublasLt.so.13", True),
        ("/v/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9", True),
        ("/v/lib/python3.11/site-packages/cuda/bindings/runtime.cpython-311-x86_64-linux-gnu.so", True),
        ("/v/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so", True),
        ("/v/lib/python3.11/site-packages/torch/lib/libc10_cuda.so", True),
        ("/v/lib/python3.11/site-packages/torch/lib/libtorch_nvshmem.so", True),
        ("/v/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", False),
        ("/v/lib/python3.11/site-packages/torch/lib/libtorch_python.so", False),
        ("/v/lib/python3.11/site-packages/torch/lib/libc10.so", False),
        ("/v/lib/python3.11/site-packages/torch/lib/libgomp.so.1", False),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", False),
    ],
)
def test_the_cuda_builds_files_are_told_from_the_cpus(path, cuda):
    """What a CUDA build of torch maps (2.14.1+cu130's layout) against what a CPU run uses."""
    assert bool(torch_build.CUDA_FILE.search(path)) is cuda


@linux_only
def test_training_drops_them_only_where_a_cuda_build_has_no_gpu(tmp_path, monkeypatch):
    """The release callback, at the start of training, drops the pages of what CUDA_FILE picks,
    in a CUDA build without a GPU, and nothing in a CPU build."""
    path = tmp_path / "libstandin_cuda.so"
    path.write_bytes(b"\0" * 16 * PAGE)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ) as m:
        assert m[::PAGE] == b"\0" * 16
        at = next(s for s, _, _, p, _ in torch_build._mappings() if p == str(path))
        monkeypatch.setattr(torch_build, "CUDA_FILE", re.compile(re.escape(str(path))))
        trainer = types.SimpleNamespace(is_global_zero=True)
        monkeypatch.setattr(torch.version, "cuda", None)
        ReleaseFreedHostMemory().on_train_start(trainer)
        assert _rss_kb(at) == 16 * PAGE // 1024
        monkeypatch.setattr(torch.version, "cuda", "13.0")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        ReleaseFreedHostMemory().on_train_start(trainer)
        assert _rss_kb(at) == 0
