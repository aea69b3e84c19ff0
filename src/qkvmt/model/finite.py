"""Which weights hold NaN or infinity: the one check every loader runs (qkvmt.model.checkpoint's
checked_model, under qkvmt's names; qkvmt.hf.weights, under a Hugging Face folder's own)."""

import numpy as np
import torch


def non_finite(weights: dict) -> dict[str, int]:
    """The weights holding NaN or infinity, in order, with how many values each. A sum is finite
    only when every value is (NaN and infinity propagate; inf - inf is NaN), so one sum per tensor
    finds them; only a sum that is not finite (or finite values overflowing it) pays for the count.
    The sums are numpy's, on one thread: about 1 ms over the bundled model's 6.6M values, where
    torch's, a parallel region per tensor, took 260 ms while another process held a core."""
    floats = {name: t for name, t in weights.items() if t.is_floating_point()}
    with np.errstate(all="ignore"):  # an overflowing sum is checked below, not warned about
        sums = np.array([t.detach().to(torch.float32).numpy().sum() for t in floats.values()])
    if np.isfinite(sums).all():
        return {}
    counts = {name: int((~torch.isfinite(t)).sum()) for name, t in floats.items()}
    return {name: n for name, n in counts.items() if n}
