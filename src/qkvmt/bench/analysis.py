"""How long the analyses of one sentence take (stage 4 of scripts/benchmark.py): a forced pass
with token scores and every signal of about one pass (qkvmt.analysis.forced.one_pass_signals:
weights, value norms, ALTI+ and any other so registered), as the API runs it per sentence, and
ALTI+ alone."""

import statistics
import time

from qkvmt.analysis.alti import alti_plus
from qkvmt.analysis.forced import forced_attention, pair_ids
from qkvmt.analysis.trace import trace
from qkvmt.model.inputs import build_inputs


def analysis_timings(ours, tokenizer, pairs: tuple[list[str], list[str]], n: int) -> dict | None:
    """Median ms per sentence of a forced pass with every signal of one pass (what the API runs
    per sentence), and of ALTI+ alone, over the first n validation pairs."""
    if ours is None or not n:
        return None
    model, whole, alti = ours.model, [], []
    device = next(model.parameters()).device
    for src, ref in list(zip(*pairs))[:n]:
        t0 = time.perf_counter()
        forced_attention(model, tokenizer, src, ref)
        whole.append(time.perf_counter() - t0)
        x = build_inputs(*([i] for i in pair_ids(tokenizer, src, ref)), model.cfg.specials, model.cfg.max_positions)
        traced = trace(model, x.src.to(device), x.tgt_in.to(device))
        t0 = time.perf_counter()
        alti_plus(traced)
        alti.append(time.perf_counter() - t0)
    return {
        "sentences": len(whole),
        "forced_pass_ms": 1000 * statistics.median(whole),
        "alti_ms": 1000 * statistics.median(alti),
    }
