"""What the installed build of torch costs a CPU training process, and what it can skip.

A plain `pip install torch` on Linux brings a CUDA build. On a machine without a GPU its CUDA
libraries still load, and initialize, with `import torch` (cuBLASLt, nvrtc, nvJitLink...: 0.29 GB
of every process, docs/results.md), and torch._dynamo, which Lightning imports, imports triton
where it is installed (it comes with the CUDA build): 78 MB more a process, for GPU kernels that
such a machine never runs. This module imports nothing heavy, so that scripts/train.py can call
`skip_idle_triton` before Lightning is imported.
"""

import sys

import torch

# What a CUDA build of torch adds to each process with triton skipped, GPU or not: 645 MB after
# importing the training code with 2.14.1+cu130, 356 MB with 2.13.0+cpu (docs/results.md).
CUDA_BUILD_MB = 290
CPU_BUILD = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def idle_cuda_build() -> str | None:
    """The first lines' note where torch is a CUDA build on a machine without a usable GPU, as a
    plain `pip install` brings on Linux (None otherwise): every process carries its CUDA
    libraries for nothing."""
    if torch.version.cuda is None or torch.cuda.is_available():
        return None
    return (f"torch {torch.__version__} is a CUDA build and this machine has no usable GPU: its CUDA libraries "
            f"take about {CUDA_BUILD_MB / 1024:.1f} GB of each process's memory for nothing; the CPU build "
            f"saves it: {CPU_BUILD}")


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
