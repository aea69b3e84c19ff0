"""sacreBLEU's paired tests as qkvmt runs them equal the sacreBLEU command line's on the same files
with the same seed: scores, p-values, bootstrap means and intervals, signatures."""

import json
import os
import random
import subprocess
import sys

import pytest

from qkvmt.errors import UserError
from qkvmt.text.significance import DEFAULTS, MOST, changed_setting, checked_settings, paired_tests

WORDS = "a man woman dog runs sits on the in green red street park near with two child ball".split()


def corpus(seed: int = 0, n: int = 120):
    """References and two systems that drop and swap words at close rates: a difference that
    chance could make, so the p-values are not at their floor."""
    rng = random.Random(seed)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(n)]

    def system(p):
        return [" ".join(w if rng.random() > p else rng.choice(WORDS) for w in r.split()) for r in refs]

    return refs, system(0.25), system(0.28)


# sacreBLEU's command line, whose JSON writer meets numpy's float32 bootstrap means, which json
# cannot write: they are written as the floats they are.
COMMAND_LINE = """
import json, sys
import numpy as np
from sacrebleu.sacrebleu import main
default = json.JSONEncoder.default
json.JSONEncoder.default = lambda self, o: float(o) if isinstance(o, np.floating) else default(self, o)
sys.argv[0] = "sacrebleu"
sys.exit(main())
"""


def command_line(tmp_path, refs, baseline, system, seed: str, *options) -> list[dict]:
    """`sacrebleu REF -i BASELINE SYSTEM -m bleu chrf -f json OPTIONS` with SACREBLEU_SEED=seed."""
    files = {}
    for name, lines in (("ref", refs), ("baseline", baseline), ("system", system)):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("".join(line + "\n" for line in lines))
    argv = [str(files["ref"]), "-i", str(files["baseline"]), str(files["system"]), "-m", "bleu", "chrf", "-f", "json"]
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_LINE, *argv, *options],
        capture_output=True,
        text=True,
        env=os.environ | {"SACREBLEU_SEED": seed},
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "test, option, seed", [("bs", "--paired-bs", "12345"), ("bs", "--paired-bs", "7"), ("ar", "--paired-ar", "3")]
)
def test_each_test_equals_the_command_line_with_the_same_seed(tmp_path, test, option, seed):
    refs, baseline, system = corpus()
    theirs = command_line(tmp_path, refs, baseline, system, seed, option)
    ours = paired_tests(system, baseline, refs, tests=[test], seed=int(seed))[test]
    base, own = theirs
    for their_name, name in (("BLEU", "bleu"), ("chrF2", "chrf")):
        got = ours[name]
        assert (got["system"], got["baseline"], got["p_value"]) == (
            own[their_name]["score"],
            base[their_name]["score"],
            own[their_name]["p_value"],
        )
        assert 0.001 < got["p_value"] < 1  # a p-value of a real comparison, not the floor
        if test == "bs":
            assert (got["system_mean"], got["system_ci"]) == (own[their_name]["mean"], own[their_name]["ci"])
            assert (got["baseline_mean"], got["baseline_ci"]) == (base[their_name]["mean"], base[their_name]["ci"])
        assert f"seed:{seed}" in ours["signatures"][name] and f"{test}:" in ours["signatures"][name]


def test_the_seed_is_set_only_while_the_tests_run_and_changes_the_draws(monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    refs, baseline, system = corpus(1)
    a, b = (paired_tests(system, baseline, refs, tests="bs", seed=s)["bs"]["bleu"] for s in (1, 2))
    assert a["system"] == b["system"] and a["system_ci"] != b["system_ci"]
    assert "SACREBLEU_SEED" not in os.environ


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tests": ["bootstrap"]}, "significance.tests"),
        ({"tests": []}, "significance.tests"),
        ({"samples": {"bs": 0}}, "significance.samples.bs=0"),
        (
            {"samples": {"bs": MOST["bs"] + 1}},
            f"significance.samples.bs={MOST['bs'] + 1}: give a whole number from 1 to",
        ),
        ({"seed": -1}, "significance.seed=-1: give a whole number of at least 0"),  # numpy's draws refuse it
        ({"bleu_tokenize": "moses"}, "metrics.bleu_tokenize='moses'"),
    ],
)
def test_settings_that_cannot_run_are_one_line_errors(kwargs, message):
    refs, baseline, system = corpus(2, n=5)
    with pytest.raises(UserError, match=message) as e:
        paired_tests(system, baseline, refs, **kwargs)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"samples": {"xx": 5}}, "significance.samples.xx: no such test"),
        ({"tests": ["bs"], "samples": {"ar": "abc"}}, "significance.samples.ar='abc'"),  # a test not named too
        ({"tests": ["ar"], "samples": {"bs": 0}}, "significance.samples.bs=0"),
        ({"samples": 5}, "significance.samples=5: give a count per test"),
        ({"tests": None}, "significance.tests=None"),
        ({"seed": "abc"}, "significance.seed='abc'"),
        ({"seed": True}, "significance.seed=true"),  # as it is typed
        ({"rounds": 3}, "significance.rounds is no setting"),
    ],
)
def test_every_setting_is_checked_whatever_tests_are_named(settings, message):
    with pytest.raises(UserError, match=message):
        checked_settings(settings)


def test_the_settings_changed_from_their_defaults_are_named():
    assert changed_setting(checked_settings({})) is None
    assert changed_setting(checked_settings(DEFAULTS | {"samples": {"bs": 1000}})) is None  # a default, given
    assert changed_setting(checked_settings({"tests": "bs"})) == "tests=[bs]"
    assert changed_setting(checked_settings({"samples": {"ar": 50}})) == "samples.ar=50"
    assert changed_setting(checked_settings({"seed": 7})) == "seed=7"
