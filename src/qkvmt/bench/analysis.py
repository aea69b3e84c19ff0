"""How long the analyses of one sentence take (stage 4 of scripts/benchmark.py): a forced pass
with token scores and every signal of about one pass (qkvmt.analysis.forced.one_pass_signals:
weights, value norms, ALTI+ and any other so registered), as the API runs it per sentence, and
ALTI+ alone; and an intervention (Model.intervene, what the explorer's "what if" panel asks):
two source tokens' keys swapped in every cross-attention layer and the sentence decoded again
with beam search, on the validation sentences nearest INTERVENE_WORDS words long (the goal: 1 s
each on 2 CPU cores)."""

import statistics
import time

from qkvmt.analysis.alti import alti_plus
from qkvmt.analysis.edits import Swap
from qkvmt.analysis.forced import forced_attention, pair_ids
from qkvmt.analysis.intervention import translate_with_and_without
from qkvmt.analysis.trace import trace
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.inputs import build_inputs

INTERVENE_WORDS = 20


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
        **intervention_timings(model, tokenizer, pairs[0], n),
    }


def intervention_timings(model, tokenizer, sources: list[str], n: int, beam_size: int = 5) -> dict:
    """Median ms of one intervention (both translations, beam search, and the forced passes that
    compare them) over the n sources nearest INTERVENE_WORDS words long."""
    closest = nearest(sources, INTERVENE_WORDS, n)
    cfg, times = DecodeConfig(beam_size=beam_size), []
    for source in closest:
        t0 = time.perf_counter()
        translate_with_and_without(model, tokenizer, source, [Swap(0, 1, "keys")], cfg)
        times.append(time.perf_counter() - t0)
    return {
        "intervene_ms": 1000 * statistics.median(times),
        "intervene_words": statistics.mean(len(s.split()) for s in closest),
    }


def nearest(sources: list[str], words: int, n: int) -> list[str]:
    """The n sources nearest `words` words long, the first of equals first."""
    return sorted(sources, key=lambda s: abs(len(s.split()) - words))[:n]
