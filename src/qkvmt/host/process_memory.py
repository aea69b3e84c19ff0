"""This process's memory as the OS reports it (its resident set, its peak, what the machine has
left), and the process-wide settings that decide how freed memory is kept: glibc's heap and
oneDNN's cache of matmul primitives. The standard library only: a process that only measures
itself (the benchmark's tokenizing stage) starts without waiting seconds for Lightning. What a
training process needs and records is qkvmt.training.host_memory.

glibc serves allocations above 32 MB (logits, their gradients) with fresh mmap()s and unmaps
them on free, so each training step page-faults its largest buffers in again. On 2 CPU cores
that cost a quarter of the step time (0.71 -> 0.53 s for model=small, measured). Turning off
mmap for large blocks and raising the trim threshold lets the heap keep and reuse them.
"""

import ctypes
import functools
import os
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
RSS_READABLE = os.path.exists("/proc/self/statm")  # resident_bytes() works (Linux)
MB = 2**20
# oneDNN keeps up to 1,024 built bf16 matmul primitives by default. Training pads its linear
# layers' rows so that an epoch of the CPU recipe needs about 290 (qkvmt.training.matmul_rows);
# 512 keeps them all with room for other pairs' lengths, so none is rebuilt (2-8 ms each with
# AMX) and none is added after the first epoch: primitives added all along fragmented the heap.
ONEDNN_CACHE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
ONEDNN_CACHE_PRIMITIVES = 512


@functools.cache  # loaded once: releases run every 50 steps
def _glibc():
    """The C library where it is glibc on Linux (mallopt, malloc_trim), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_freed_host_memory(trim_threshold: int = 1 << 30) -> bool:
    """Returns whether the setting took effect (glibc on Linux only; elsewhere a no-op)."""
    libc = _glibc()
    return (
        libc is not None and bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))
    )


def bound_onednn_cache(capacity: int = ONEDNN_CACHE_PRIMITIVES) -> int:
    """Caps oneDNN's primitive cache for this process and the processes it starts, unless the
    user set ONEDNN_PRIMITIVE_CACHE_CAPACITY; returns the capacity in force. oneDNN reads the
    variable when it builds its first primitive, so this must run before any bf16 product."""
    os.environ.setdefault(ONEDNN_CACHE, str(capacity))
    return int(os.environ[ONEDNN_CACHE])


def prepare_host_memory() -> int:
    """The process-wide settings a CPU training process runs with (training, and the benchmark,
    which measures it): freed blocks kept, oneDNN's cache bounded. Returns the cache's capacity."""
    keep_freed_host_memory()
    return bound_onednn_cache()


def release_freed_host_memory() -> bool:
    """Give the pages of every free heap block back to the OS (glibc's malloc_trim(0)); returns
    whether it could (glibc on Linux only)."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


def resident_bytes() -> int:
    """This process's resident set now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_resident_bytes() -> int:
    """This process's largest resident set so far: on Linux the high-water mark of its own
    address space (VmHWM), elsewhere ru_maxrss (bytes on macOS, KB on other Unixes).

    Not ru_maxrss on Linux: a process started by fork and exec (multiprocessing's spawn,
    subprocess, Lightning's DDP launcher; with vfork, as Python uses) begins with its parent's
    high-water mark in it, so a small process started by a large one reports the large one's
    peak (4 GB for a 0.5 GB training process started by the benchmark, measured)."""
    if RSS_READABLE:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    import resource  # Unix only

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def available_bytes() -> int | None:
    """What the machine can still give without swapping (MemAvailable), or None off Linux."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
