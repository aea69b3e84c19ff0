import pytest

from qkvmt.errors import UserError
from qkvmt.training.lr_schedule import inverse_sqrt, linear, lr_factor


def test_inverse_sqrt_peaks_at_the_end_of_warmup_then_falls_as_step_to_the_minus_half():
    f = inverse_sqrt(100)
    assert f(0) == pytest.approx(1 / 100) and f(99) == pytest.approx(1.0)
    assert f(399) == pytest.approx(0.5)  # step 400 = 4 x warmup: half the peak


def test_linear_on_a_step_budget_is_the_usual_warmup_then_linear_decay():
    T, w = 50, 10
    f = linear(w, lambda done: done / T)
    # The usual form: (done + 1)/w in warmup, then (T - done)/(T - w), written out independently.
    expected = [(d + 1) / w if d < w else (T - d) / (T - w) for d in range(T)]
    assert [f(d) for d in range(T)] == pytest.approx(expected)
    assert f(T - 1) > 0  # the last step still learns


def test_linear_on_a_time_budget_matches_the_step_form_when_steps_take_equal_time():
    # 0.8 s a step in a 40 s budget: 50 steps, though the schedule is told only the time spent.
    step_s, budget_s, w = 0.8, 40.0, 10
    f = linear(w, lambda done: done * step_s / budget_s)
    assert [f(d) for d in range(50)] == pytest.approx(
        [(d + 1) / w if d < w else (50 - d) / (50 - w) for d in range(50)]
    )


def test_linear_on_a_time_budget_is_zero_when_time_is_up_and_slower_steps_decay_sooner():
    f = linear(10, lambda done: 1.0)
    assert f(10) == 0.0 and f(500) == 0.0
    # At a given step, the more of the time budget is spent the lower the lr, from the peak at
    # the end of warmup down to zero.
    at_step_50 = [linear(10, lambda d, p=p: p)(50) for p in (0.0, 0.2, 0.5, 0.9, 0.99)]
    assert at_step_50[0] == 1.0 and all(a > b > 0 for a, b in zip(at_step_50, at_step_50[1:]))


def test_linear_without_warmup_starts_at_the_peak():
    f = linear(0, lambda done: done / 10)
    assert f(0) == 1.0 and f(5) == pytest.approx(0.5)


def test_an_unknown_schedule_is_a_user_error_naming_the_choices():
    with pytest.raises(UserError, match=r"module.lr_schedule='cosine'.*inverse_sqrt, linear"):
        lr_factor("cosine", 10, lambda done: 0.0)
