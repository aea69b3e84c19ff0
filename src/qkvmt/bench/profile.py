"""Where a training step's time goes: torch.profiler over a few of our training steps.

The GPU benchmark (docs/results.md, "Speed") reached 10% MFU, and a step's wall
time alone cannot say whether the GPU was busy or waiting for the host to launch its kernels.
This puts the two side by side: the step's wall time, and the time the device spent running
kernels. Where the second is far below the first, the step is bound by the host (Python,
launches), and faster kernels would not help. On a CPU there is no device time; the table
then ranks the operators by their own CPU time.
"""

import time

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from qkvmt.bench.timing import TrainTimer


def device_busy_ms(events, steps: int) -> float:
    """Milliseconds per step the device spent running kernels. The profiler lists each kernel
    as a row of its own and also adds its time to the operator that launched it: only the
    kernels' own rows are counted, or the time would be counted twice."""
    return sum(e.self_device_time_total for e in events if e.device_type != DeviceType.CPU) / 1000 / steps


def profile_training(timer: TrainTimer, batches: list[dict], steps: int, top: int = 15) -> tuple[dict, str]:
    """Profile `steps` (> 0) training steps of one system (after the timed ones, so warm).

    Returns (summary, table): summary has the steps, the wall milliseconds per step (the
    profiler's own overhead in it), the device's busy milliseconds per step (None on a CPU) and
    the `top` operators by their own time (on a GPU, the time of the kernels they launched);
    table is torch's own key_averages table of the same, to be written beside benchmark.json."""
    on_device = timer.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_device else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for i in range(steps):
            timer.step(batches[i % len(batches)])
        wall = time.perf_counter() - start
    events = prof.key_averages()
    sort_key = "self_device_time_total" if on_device else "self_cpu_time_total"
    operators = [e for e in events if e.device_type == DeviceType.CPU]
    ranked = sorted(operators, key=lambda e: getattr(e, sort_key), reverse=True)
    summary = {
        "steps": steps,
        "step_ms": 1000 * wall / steps,
        "device_busy_ms": device_busy_ms(events, steps) if on_device else None,
        "top": [
            {
                "op": e.key,
                "calls_per_step": e.count / steps,
                "self_cpu_ms": e.self_cpu_time_total / 1000 / steps,
                "self_device_ms": e.self_device_time_total / 1000 / steps if on_device else None,
            }
            for e in ranked[:top]
        ],
    }
    return summary, events.table(sort_by=sort_key, row_limit=top * 2)
