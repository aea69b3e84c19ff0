"""The Context signals share: its intermediates are computed once, on first use, and a reading
over another trace of the pass (the full-context reading) shares those of the pass that predicts."""

from dataclasses import replace

import torch

from qkvmt.analysis.signals import SIGNALS, Context
from qkvmt.analysis.trace import trace
from tests.analysis.test_signals_rollout import sentence


def test_a_reading_shares_the_predicting_pass_intermediates():
    model, src, tgt_in, tgt_out = sentence()
    with torch.no_grad():
        traced = trace(model, src, tgt_in)
        context = Context(model, traced, tgt_out)
        assert context.shared.computed_contributions is None  # nothing computed until a signal asks
        uniform = [replace(site, weights=torch.full_like(site.weights, 0.2)) for site in traced.layers["cross"]]
        read = context.reading(replace(traced, layers={**traced.layers, "cross": uniform}))
        SIGNALS["alti"](read)  # computed through the reading: still the predicting pass's
        assert context.shared.computed_contributions is read.contributions is context.contributions
        assert read.transformed_values is context.transformed_values
        own = Context(model, read.traced, tgt_out).contributions  # the changed weights' own ALTI+ differs
        assert not (own.source == context.contributions.source).all()
