"""Where a training step's time goes, or a beam search's: torch.profiler over a few of our
training steps, or over one of our decoding calls.

The GPU benchmark (docs/results.md, "Speed") reached 10% MFU, and a step's wall
time alone cannot say whether the GPU was busy or waiting for the host to launch its kernels.
This puts the two side by side: the step's wall time, and the time the device spent running
kernels. Where the second is far below the first, the step is bound by the host (Python,
launches), and faster kernels would not help. On a CPU there is no device time; the table
then ranks the operators by their own CPU time.

Beside them, where the step's copies come from (`copy_origins`): a GPU step launched some 500
copy kernels, and the kernel table names none of their callers.
"""

import time
from collections import Counter

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from qkvmt.bench.timing import TrainTimer


def device_busy_ms(events, steps: int) -> float:
    """Milliseconds per step the device spent running kernels. The profiler lists each kernel
    as a row of its own and also adds its time to the operator that launched it: only the
    kernels' own rows are counted, or the time would be counted twice."""
    return sum(e.self_device_time_total for e in events if e.device_type != DeviceType.CPU) / 1000 / steps


# The copy machinery: operators whose work is the copy itself, skipped when naming who asked for it.
COPYING = {"aten::copy_", "aten::to", "aten::_to_copy", "aten::clone", "aten::empty_like", "aten::empty_strided"}
DIRECT = "(called directly)"  # a copy with no operator above it but the copy machinery


def copy_origins(events, steps: int, top: int = 20) -> dict:
    """Where `steps` profiled steps' copies (aten::copy_, the operator that launches a copy
    kernel) come from, per step, most first: each counted under its two nearest callers outside
    COPYING, and the shape copied. "aten::linear" with a weight's shape is autocast casting that
    weight, "ToCopyBackward0" its gradient cast back, "aten::reshape" heads merged from a
    transposed layout. `events`: the profiler's FunctionEvents (with record_shapes for shapes)."""
    found = Counter()
    for e in events:
        if e.name != "aten::copy_":
            continue
        callers, p = [], e.cpu_parent
        while p is not None and len(callers) < 2:
            if p.name not in COPYING:
                callers.append(p.name)
            p = p.cpu_parent
        shape = tuple(e.input_shapes[0]) if e.input_shapes else ()
        found[(" < ".join(callers) or DIRECT, shape)] += 1
    return {
        "per_step": sum(found.values()) / steps,
        "origins": [
            {"origin": origin, "shape": list(shape), "per_step": n / steps}
            for (origin, shape), n in found.most_common(top)
        ],
    }


def profile_training(timer: TrainTimer, batches: list[dict], steps: int, top: int = 15) -> tuple[dict, str]:
    """Profile `steps` (> 0) training steps of one system (after the timed ones, so warm).

    Returns (summary, table): summary has the steps, the wall milliseconds per step (the
    profiler's own overhead in it), the device's busy milliseconds per step (None on a CPU) and
    the `top` operators by their own time (on a GPU, the time of the kernels they launched);
    table is torch's own key_averages table of the same, to be written beside benchmark.json."""
    return profile_steps(lambda i: timer.step(batches[i % len(batches)]), steps, timer.device.type == "cuda", top)


def profile_steps(step, steps: int, on_device: bool, top: int = 15) -> tuple[dict, str]:
    """step(i) for i < steps under torch.profiler: profile_training's summary and table, for any
    step (one beam search over the benchmark's sentences, as the decoding stage profiles it)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_device else [])
    with profile(activities=activities, record_shapes=True) as prof:
        start = time.perf_counter()
        for i in range(steps):
            step(i)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    sort_key = "self_device_time_total" if on_device else "self_cpu_time_total"
    operators = [e for e in events if e.device_type == DeviceType.CPU]
    ranked = sorted(operators, key=lambda e: getattr(e, sort_key), reverse=True)
    summary = {
        "steps": steps,
        "step_ms": 1000 * wall / steps,
        "device_busy_ms": device_busy_ms(events, steps) if on_device else None,
        "copies": copy_origins(prof.events(), steps),
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
    copies = summary["copies"]
    lines = [f"{o['per_step']:8.1f}  {o['origin']}  {o['shape']}" for o in copies["origins"]]
    where = f"\n\nCopies (aten::copy_) per step: {copies['per_step']:.1f}, by caller and shape:\n" + "\n".join(lines)
    return summary, events.table(sort_by=sort_key, row_limit=top * 2) + where
