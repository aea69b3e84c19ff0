"""Gradient signals: input × gradient and integrated gradients against autograd row by row (the
rows in one part or in several, each part's decoder cut after its last row), integrated gradients'
completeness as its steps grow, and models in which one source token alone decides."""

import pytest
import torch

from qkvmt.analysis.signals import SIGNALS, Context, gradients
from qkvmt.analysis.signals.gradients import integrated_gradients
from qkvmt.analysis.trace import edited, trace
from tests.analysis.test_signals_rollout import one_source_token_decides, sentence


def log_probs(model, src, tgt_in, tgt_out, embedded=None) -> torch.Tensor:
    """log p(tgt_out[t]) at every row t (T,), with the source embedding replaced, if given."""
    with edited(model, {} if embedded is None else {"src_embedded": lambda _: embedded}):
        logits, _ = model(src, tgt_in)
    return logits[0].log_softmax(-1)[torch.arange(tgt_out.size(1)), tgt_out[0]]


def maps(model, src, tgt_in, tgt_out, signal):
    return torch.tensor(SIGNALS[signal](Context(model, trace(model, src, tgt_in), tgt_out))["cross"].layers)


@pytest.mark.parametrize("copies", [gradients.COPIES, 2])  # every row in one part; two rows a part
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_input_x_gradient_is_each_rows_own_gradient(norm_first, positions, copies, monkeypatch):
    monkeypatch.setattr(gradients, "COPIES", copies)
    model, src, tgt_in, tgt_out = sentence(norm_first, positions)
    e = model.src_embed(src).detach()
    expected = []
    for t in range(tgt_out.size(1)):  # one backward pass per row
        leaf = e.clone().requires_grad_()
        (g,) = torch.autograd.grad(log_probs(model, src, tgt_in, tgt_out, leaf)[t], leaf)
        expected.append((leaf * g)[0].norm(dim=-1))
    got = maps(model, src, tgt_in, tgt_out, "input_x_gradient")
    assert got.shape == (1, 5, 6)
    torch.testing.assert_close(got[0], torch.stack(expected).detach(), atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_integrated_gradients_add_up_to_the_change_in_log_probability(norm_first):
    model, src, tgt_in, tgt_out = sentence(norm_first)
    e = model.src_embed(src).detach()
    e0 = e - model.src_embed.tokens(src) * model.src_embed.scale  # the positions alone
    with torch.no_grad():
        change = log_probs(model, src, tgt_in, tgt_out) - log_probs(model, src, tgt_in, tgt_out, e0)
    gaps = [
        (integrated_gradients(model, src, tgt_in, tgt_out, e, steps).sum(-1) - change).abs().max()
        for steps in (4, 32, 256)
    ]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.01 * change.abs().max()
    torch.testing.assert_close(
        maps(model, src, tgt_in, tgt_out, "integrated_gradients")[0],
        integrated_gradients(model, src, tgt_in, tgt_out, e).abs(),
    )


@pytest.mark.parametrize("copies", [gradients.COPIES, 4])  # every row in one part; one row a part
def test_integrated_gradients_are_the_trapezoid_rule_from_the_positions_alone(copies, monkeypatch):
    monkeypatch.setattr(gradients, "COPIES", copies)
    model, src, tgt_in, tgt_out = sentence(norm_first=True, seed=1)
    e = model.src_embed(src).detach()
    e0 = e - model.src_embed.tokens(src) * model.src_embed.scale
    steps, expected = 3, []
    for t in range(tgt_out.size(1)):
        integral = torch.zeros_like(e)
        for k in range(steps + 1):  # α = k / steps, the ends weighted by half
            leaf = (e0 + k / steps * (e - e0)).requires_grad_()
            (g,) = torch.autograd.grad(log_probs(model, src, tgt_in, tgt_out, leaf)[t], leaf)
            integral += (0.5 if k in (0, steps) else 1.0) / steps * g
        expected.append(((e - e0) * integral)[0].sum(-1))
    torch.testing.assert_close(
        integrated_gradients(model, src, tgt_in, tgt_out, e, steps), torch.stack(expected), atol=1e-6, rtol=1e-4
    )


def test_input_x_gradient_puts_everything_on_the_one_source_token_that_decides():
    model, src, tgt_in, tgt_out = sentence()
    j = one_source_token_decides(model, src)
    scores = maps(model, src, tgt_in, tgt_out, "input_x_gradient")[0]  # (T, S)
    others = torch.cat([scores[:, :j], scores[:, j + 1 :]], dim=1)
    assert (scores[:, j] > 0).all() and (others < 1e-6 * scores[:, j : j + 1]).all()


def test_integrated_gradients_put_the_whole_change_on_the_one_source_token_not_masked():
    model, src, tgt_in, tgt_out = sentence()
    pad, j = model.cfg.pad_id, 2
    with torch.no_grad():
        model.src_embed.tokens.weight[pad].normal_()  # the masked tokens move along the path too
    src = torch.full_like(src, pad)
    src[0, j] = 7  # every other source position is masked out of every attention
    e = model.src_embed(src).detach()
    e0 = e - model.src_embed.tokens(src) * model.src_embed.scale
    assert ((e - e0).norm(dim=-1) > 0).all()
    with torch.no_grad():
        change = log_probs(model, src, tgt_in, tgt_out) - log_probs(model, src, tgt_in, tgt_out, e0)
    attributions = integrated_gradients(model, src, tgt_in, tgt_out, e, steps=64)
    others = torch.cat([attributions[:, :j], attributions[:, j + 1 :]], dim=1)
    assert (others == 0).all()
    torch.testing.assert_close(attributions[:, j], change, atol=0.01 * change.abs().max(), rtol=0)


@pytest.mark.parametrize("signal", ["input_x_gradient", "integrated_gradients"])
def test_a_context_that_names_rows_gets_those_rows_alone_and_the_same_numbers(signal):
    model, src, tgt_in, tgt_out = sentence(norm_first=True, seed=2)
    traced = trace(model, src, tgt_in)
    every = SIGNALS[signal](Context(model, traced, tgt_out))["cross"].layers[0]  # (T, S)
    some = SIGNALS[signal](Context(model, traced, tgt_out, rows=[3, 1, 3]))["cross"].layers[0]
    assert some.shape == every.shape
    torch.testing.assert_close(torch.tensor(some[[1, 3]]), torch.tensor(every[[1, 3]]), atol=1e-6, rtol=1e-4)
    assert torch.tensor(some[[0, 2, 4]]).isnan().all()
