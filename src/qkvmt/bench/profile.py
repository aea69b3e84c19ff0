"""Where a training step's time goes: torch.profiler over a few of our training steps.

The first GPU run (docs/results.md, "GPU: the first run") reached 10% MFU, and a step's wall
time alone cannot say whether the GPU was busy or waiting for the host to launch its kernels.
This puts the two side by side: the step's wall time, and the time the device spent running
kernels. Where the second is far below the first, the step is bound by the host (Python,
launches), and faster kernels would not help. On a CPU there is no device time; the table
then ranks the operators by their own CPU time.
"""

import time

import torch
from torch.profiler import ProfilerActivity, profile

from qkvmt.bench.timing import TrainTimer, sync


def _device_us(event) -> float:
    """An operator's own device time in µs; torch < 2.4 names it after CUDA."""
    return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0)


def profile_training(timer: TrainTimer, batches: list[dict], steps: int, top: int = 15) -> tuple[dict, str]:
    """Profile `steps` training steps of one system (after the timed ones, so warm).

    Returns (summary, table): summary has the steps, the wall milliseconds per step (the
    profiler's own overhead in it), the device's
    busy milliseconds per step (None on a CPU) and the `top` operators by own time; table is
    torch's own key_averages table of the same, to be written beside benchmark.json."""
    on_device = timer.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_device else [])
    sync(timer.device)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for i in range(steps):
            timer.step(batches[i % len(batches)])
        wall = time.perf_counter() - start
    events = prof.key_averages()
    sort_key = "self_device_time_total" if on_device else "self_cpu_time_total"
    ranked = sorted(events, key=(_device_us if on_device else lambda e: e.self_cpu_time_total), reverse=True)
    busy_ms = sum(_device_us(e) for e in events) / 1000 / steps if on_device else None
    summary = {
        "steps": steps,
        "step_ms": 1000 * wall / steps,
        "device_busy_ms": busy_ms,
        "top": [
            {
                "op": e.key,
                "calls_per_step": e.count / steps,
                "self_cpu_ms": e.self_cpu_time_total / 1000 / steps,
                "self_device_ms": _device_us(e) / 1000 / steps if on_device else None,
            }
            for e in ranked[:top]
        ],
    }
    try:
        table = events.table(sort_by=sort_key, row_limit=top * 2)
    except (AttributeError, KeyError):  # torch < 2.4 sorts by the CUDA name
        table = events.table(sort_by="self_cuda_time_total", row_limit=top * 2)
    return summary, table
