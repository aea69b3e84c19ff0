"""Causal tracing over a corpus (`Model.patch_study`, `qkvmt patch`): for pairs of sources that differ
in a word (*Ein Mann* / *Eine Frau*), the share of the clean–corrupt difference in a metric that
putting back one clean slice restores, for each named activation, head and position.

    share = (metric(corrupt, slice patched from clean) - metric(corrupt)) / (metric(clean) - metric(corrupt))

The metric, by default, is the log-probability of the clean translation's token where the two
translations first differ, read over the clean translation's prefix in both passes. Real patching
runs one batched pass per slice (qkvmt.studies.patching.patching); attribution patching estimates
every slice from one backward pass a batch (qkvmt.studies.patching.attribution). Both are computed:
with method="patching" over every pair, and the correlation of the two over every slice is reported;
with method="attribution" the estimate over every pair and real patching over the first `check`
pairs only, for that correlation.
"""

import time

import numpy as np
import torch

from qkvmt.analysis.forced import target_names, token_names
from qkvmt.analysis.named_pass import names_wanted
from qkvmt.errors import UserError
from qkvmt.host.machine import recorded_with
from qkvmt.model.hook_names import hook_points
from qkvmt.studies.checks import patch_settings
from qkvmt.studies.model_protocol import identity
from qkvmt.studies.patching.attribution import attribution
from qkvmt.studies.patching.pairs import aligned, checked_texts, with_targets
from qkvmt.studies.patching.patching import Batch, clean_pass, metric_of, patched, slots, units
from qkvmt.studies.patching.result import PatchStudy, summarized

LEAST_CHANGE = 1e-6  # a pair whose metric the corrupt source changes by less has no share to restore


def measurable(model, pairs, names, metric, left):
    """The pairs whose metric the corrupt source moves, their batch and clean pass."""
    batch = Batch(model, pairs)
    clean, m_clean, m_corrupt = clean_pass(model, batch, len(pairs), names, metric)
    moved = (m_clean - m_corrupt).abs() > LEAST_CHANGE
    if bool(moved.all()):
        return pairs, batch, clean, m_clean, m_corrupt
    for pair in [p for p, ok in zip(pairs, moved.tolist()) if not ok]:
        left[pair.index] = "the corrupt source leaves the metric as it is"
    pairs = [p for p, ok in zip(pairs, moved.tolist()) if ok]
    if not pairs:
        return pairs, None, None, None, None
    return measurable(model, pairs, names, metric, left)


def real_shares(pairs, layout, heads: int, todo, values, m_corrupt, difference) -> dict[str, list[np.ndarray]]:
    """{name: per pair (H or 1, positions)} the share each patched pass restored."""
    real = {s.name: [np.full((heads if s.heads else 1, s.positions(p)), np.nan) for p in pairs] for s in layout}
    for (p, s, h, i), v in zip(todo, values.cpu().tolist()):
        real[layout[s].name][p][h, i] = (v - float(m_corrupt[p])) / float(difference[p])
    return real


def correlated(real: dict, approx: dict, checked: int) -> float | None:
    """Pearson's r of the estimate and real patching over every slice of the pairs both ran on."""
    both = [(real[n][p].ravel(), approx[n][p].ravel()) for n in real for p in range(checked)]
    if not both or sum(len(r) for r, _ in both) < 2:
        return None
    return float(np.corrcoef(np.concatenate([r for r, _ in both]), np.concatenate([a for _, a in both]))[0, 1])


def patch_study(
    model,
    clean,
    corrupt,
    names="decoder.*.cross.v",
    metric="log_prob",
    method: str = "patching",
    unequal: str = "error",
    batch_size: int = 256,
    check: int = 10,
    **decode,
) -> PatchStudy:
    start, seconds = time.time(), {}
    clean, corrupt = checked_texts(clean, corrupt)
    patch_settings(method, batch_size, check)
    t, tokenizer = model.transformer, model.tokenizer
    wanted = names_wanted(t, names)
    layout, metric_fn = slots(hook_points(t), wanted), metric_of(metric)
    kept, left = aligned(tokenizer, clean, corrupt, unequal)
    outputs = model.translate([k[1] for k in kept] + [k[2] for k in kept], **decode).ids if kept else []
    pairs = with_targets(kept, outputs[: len(kept)], outputs[len(kept) :], t.cfg.eos_id, left)
    seconds["translate"] = time.time() - start
    pairs, batch, acts, m_clean, m_corrupt = measurable(t, pairs, wanted, metric_fn, left) if pairs else ([],) * 5
    if not pairs:
        reasons = "; ".join(f"pair {i}: {why}" for i, why in sorted(left.items())[:5])
        raise UserError(f"no pair left to patch ({reasons}): give pairs whose translations differ")
    n, heads = len(pairs), t.cfg.n_heads
    tick = time.time()
    estimate = attribution(t, batch, n, layout, acts, metric_fn, max(1, batch_size // 16))
    seconds["attribution"] = time.time() - tick
    checked = n if method == "patching" else min(check, n)
    tick = time.time()
    todo = units(pairs[:checked], layout, heads)
    values = patched(t, batch, todo, layout, acts, metric_fn, batch_size) if todo else torch.empty(0)
    seconds["patching"] = time.time() - tick
    difference = (m_clean - m_corrupt).cpu()
    real = real_shares(pairs[:checked], layout, heads, todo, values, m_corrupt.cpu(), difference)
    approx = {
        s.name: [(estimate[s.name][p][:, : s.positions(q)].cpu() / difference[p]).numpy() for p, q in enumerate(pairs)]
        for s in layout
    }
    correlation = correlated(real, approx, checked)
    records = [
        {
            "index": pair.index,
            "clean": pair.clean,
            "corrupt": pair.corrupt,
            "source_tokens": token_names(tokenizer, [*pair.clean_ids, t.cfg.eos_id]),
            "corrupt_tokens": token_names(tokenizer, [*pair.corrupt_ids, t.cfg.eos_id]),
            "changed": pair.changed,
            "prefix": target_names(tokenizer, pair.prefix),
            "clean_token": target_names(tokenizer, [pair.clean_token])[0],
            "corrupt_token": target_names(tokenizer, [pair.corrupt_token])[0],
            "metric_clean": float(m_clean[p]),
            "metric_corrupt": float(m_corrupt[p]),
            "attribution": {name: shares[p].tolist() for name, shares in approx.items()},
            **({"patching": {name: shares[p].tolist() for name, shares in real.items()}} if p < checked else {}),
        }
        for p, pair in enumerate(pairs)
    ]
    seconds["total"] = time.time() - start
    result = {
        **identity(model),
        "study": "tracing",
        "n": n,
        "given": len(clean),
        "left_out": {str(i): why for i, why in sorted(left.items())},
        "names": wanted,
        "sides": {s.name: s.side for s in layout},
        "heads": {s.name: heads if s.heads else 1 for s in layout},
        "metric": metric if isinstance(metric, str) else getattr(metric, "__name__", "a function"),
        "method": method,
        "unequal": unequal,
        "patched_pairs": checked,
        "patched_passes": len(todo),
        "correlation": correlation,
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "pairs": records,
        **recorded_with(),
    }
    return PatchStudy(summarized(result))
