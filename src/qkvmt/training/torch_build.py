"""What the installed build of torch costs a CPU training process, and what it can skip.

A plain `pip install torch` on Linux brings a CUDA build. On a machine without a GPU its CUDA
libraries still load, and initialize, with `import torch` (cuBLASLt, nvrtc, nvJitLink...: 0.29 GB
of every process after its imports), and torch._dynamo, which Lightning imports, imports triton
where it is installed (it comes with the CUDA build): 78 MB more a process, for GPU kernels that
such a machine never runs. This module imports nothing heavy, so that scripts/train.py can call
`skip_idle_triton` before Lightning is imported.

Half of those 0.29 GB are pages of the CUDA libraries' files that loading read once (symbol and
relocation tables, initialization code) and a CPU never reads again: 0.14 GB a process
(2.14.1+cu130). They are clean copies of the files, so `drop_idle_cuda_pages` takes them out of
the process's page tables; they stay in the page cache, shared and reclaimable, and come back
from it if anything reads them.
"""

import ctypes
import mmap
import re
import sys

import torch

# What a CUDA build of torch adds to each CPU training process with triton skipped: 645 MB after
# importing the training code with 2.14.1+cu130, 356 MB with 2.13.0+cpu, less the 142 MB of file
# pages dropped at the start of training (measured on an AMX Xeon). The rest is the libraries' own
# memory, written when they load (cuBLASLt's static tables alone: 84 MB).
CUDA_BUILD_MB = 150
CPU_BUILD = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
# The files of a CUDA build: the nvidia-* wheels' libraries, cuda-python's bindings, torch's own.
CUDA_FILE = re.compile(r"/nvidia/|/cuda/|/lib(?:c10_cuda|torch_cuda\w*|torch_nvshmem)\.so")


def idle_cuda_build() -> str | None:
    """The first lines' note where torch is a CUDA build on a machine without a usable GPU, as a
    plain `pip install` brings on Linux (None otherwise): every process carries its CUDA
    libraries for nothing."""
    if torch.version.cuda is None or torch.cuda.is_available():
        return None
    return (
        f"torch {torch.__version__} is a CUDA build and this machine has no usable GPU: its CUDA libraries "
        f"take about {CUDA_BUILD_MB / 1024:.2f} GB of each process's memory for nothing; the CPU build "
        f"saves it: {CPU_BUILD}"
    )


def skip_idle_triton() -> bool:
    """Where no GPU can run triton's kernels, make `import triton` fail in this process, as if it
    were not installed: torch then treats it as absent (torch.compile on a CPU generates C++, not
    triton). Must run before torch._dynamo is imported (Lightning imports it); a process that
    already imported triton keeps it. Returns whether triton is skipped."""
    if "triton" in sys.modules:  # imported already, or skipped already
        return sys.modules["triton"] is None
    if torch.cuda.is_available():
        return False
    sys.modules["triton"] = None  # the import system's own marker of a module that cannot be imported
    return True


def _mappings():
    """This process's mappings from /proc/self/smaps: (start, end, perms, path, {field: kB})."""
    maps, fields = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                start, end = (int(a, 16) for a in head[0].split("-"))
                fields = {}
                maps.append((start, end, head[1], head[5] if len(head) > 5 else "", fields))
            elif len(head) == 3 and head[2] == "kB":
                fields[head[0].rstrip(":")] = int(head[1])
    return maps


def drop_file_pages(is_target) -> int:
    """Takes out of this process's page tables the resident pages of the read-only mappings of
    the files `is_target(path)` picks, where the process holds no page of its own (none written,
    none swapped): those pages are the file's, and a later read maps them again from the page
    cache. Returns the bytes of resident set dropped; 0 off Linux."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None)  # the process's own C library, glibc or not
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    dropped = 0
    for start, end, perms, path, kb in _mappings():
        if (
            path.startswith("/")
            and "w" not in perms
            and kb.get("Rss", 0)
            and not kb.get("Anonymous", 0)
            and not kb.get("Swap", 0)
            and is_target(path)
            and libc.madvise(start, end - start, mmap.MADV_DONTNEED) == 0
        ):
            dropped += kb["Rss"] * 1024
    return dropped


def drop_idle_cuda_pages() -> int:
    """Where torch is a CUDA build without a usable GPU, drops the CUDA libraries' file pages
    that loading left resident (drop_file_pages); returns the bytes dropped (0 elsewhere)."""
    return drop_file_pages(CUDA_FILE.search) if idle_cuda_build() else 0
