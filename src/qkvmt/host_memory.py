"""Keep freed host memory for reuse instead of returning it to the OS after every step.

glibc serves allocations above 32 MB (logits, their gradients) with fresh mmap()s and unmaps
them on free, so each training step page-faults its largest buffers in again. On 2 CPU cores
that cost a quarter of the step time (0.71 -> 0.53 s for model=small, measured). Turning off
mmap for large blocks and raising the trim threshold lets the heap keep and reuse them.
"""

import ctypes
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4


def keep_freed_host_memory(trim_threshold: int = 1 << 30) -> bool:
    """Returns whether the setting took effect (glibc on Linux only; elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
