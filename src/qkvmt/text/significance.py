"""Is one system's score different from another's by more than chance? sacreBLEU's paired tests,
run by the library itself: paired bootstrap resampling (Koehn 2004), which also estimates each
system's true mean and 95% confidence interval, and approximate randomization (Riezler and Maxwell
2005). The results and signatures are those of `sacrebleu REF -i BASELINE SYSTEM --paired-bs`
(or `--paired-ar`) with the same seed."""

import contextlib
import math
import os

import numpy as np
import sacrebleu
from sacrebleu.significance import PairedTest

from qkvmt.errors import UserError
from qkvmt.setting_types import whole_number
from qkvmt.text.metrics import DEFAULT_TOKENIZE, bleu_metric, forgets_tokenized_lines

TESTS = {"bs": "paired bootstrap resampling", "ar": "approximate randomization"}
SAMPLES = {"bs": 1000, "ar": 10000}  # sacreBLEU's own defaults: resamples, trials
# Ten times those at most: sacreBLEU draws every resample at once, and at these bounds a test of
# 1,000 sentences holds about a gigabyte (bs: 18 chrF statistics a sentence a resample, in float32;
# ar: two masks and their cast for the product) for 6 s (bs) or 20 s (ar) on one core. More
# would refine a p-value below 1/100,000, far under any level of significance a paper uses.
MOST = {test: 10 * n for test, n in SAMPLES.items()}
NAMES = {"BLEU": "bleu", "chrF2": "chrf"}  # sacreBLEU's names of the scores -> ours
DEFAULTS = {"tests": list(TESTS), "samples": dict(SAMPLES), "seed": 12345}  # as conf/evaluate.yaml sets them


@contextlib.contextmanager
def seeded(seed: int):
    """sacreBLEU reads its seed from SACREBLEU_SEED whenever it draws; set only while it runs."""
    before = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if before is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = before


def checked_tests(tests, samples: dict | None = None) -> dict[str, int]:
    """The tests asked for (names of TESTS) -> their number of resamples or trials. Every sample
    count given is checked, named test or not: a mistyped one would otherwise pass unnoticed."""
    if not isinstance(tests, str | list | tuple):
        raise UserError(f"significance.tests={tests!r}: give a list of some of {', '.join(TESTS)}")
    tests = [tests] if isinstance(tests, str) else list(tests)
    unknown = [t for t in tests if t not in TESTS]
    if not tests or unknown:
        raise UserError(f"significance.tests={tests}: name some of {', '.join(TESTS)} ({', '.join(TESTS.values())})")
    if samples is not None and not isinstance(samples, dict):
        raise UserError(f"significance.samples={samples!r}: give a count per test, e.g. significance.samples.bs=1000")
    samples = SAMPLES | (samples or {})
    for test, n in samples.items():
        if test not in TESTS:
            raise UserError(f"significance.samples.{test}: no such test; give counts for some of {', '.join(TESTS)}")
        whole_number(f"significance.samples.{test}", n, most=MOST[test])
    return {t: samples[t] for t in tests}


def checked_settings(settings: dict) -> dict:
    """The paired tests' settings (tests, samples, seed; DEFAULTS for those not given), every key
    and value checked, so that none can fail once the translating is done."""
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise UserError(f"significance.{unknown[0]} is no setting: give some of {', '.join(DEFAULTS)}")
    given = DEFAULTS | settings
    runs = checked_tests(given["tests"], given["samples"])
    seed = whole_number("significance.seed", given["seed"], least=0)  # sacreBLEU's numpy draws need 0 or more
    return {"tests": tuple(runs), "samples": SAMPLES | (given["samples"] or {}), "seed": seed}


def changed_setting(checked: dict) -> str | None:
    """The first of the checked settings (checked_settings) that is not its default, as
    `name=value` the way the command line writes it, or None."""

    def flat(settings: dict) -> dict:
        samples = {f"samples.{t}": str(n) for t, n in settings["samples"].items()}
        return {"tests": f"[{','.join(settings['tests'])}]", **samples, "seed": str(settings["seed"])}

    defaults = flat(DEFAULTS)
    return next((f"{k}={v}" for k, v in flat(checked).items() if defaults[k] != v), None)


@forgets_tokenized_lines
def paired_tests(
    system: list[str],
    baseline: list[str],
    references: list[str],
    tests=("bs", "ar"),
    samples: dict | None = None,
    seed: int = 12345,
    bleu_tokenize: str = DEFAULT_TOKENIZE,
) -> dict:
    """`system` against `baseline` (translations of the same sources) on `references`, by each test:
    {test: {"bleu"|"chrf": {system, baseline, p_value, and for bs each one's mean and ci (half the
    95% interval)}, "signatures": {...}}}."""
    checked = checked_settings({"tests": tests, "samples": samples or {}, "seed": seed})
    runs = {t: checked["samples"][t] for t in checked["tests"]}
    out = {}
    for test, n in runs.items():
        metrics = {"BLEU": bleu_metric(bleu_tokenize), "chrF2": sacrebleu.metrics.CHRF()}
        with seeded(seed):
            paired = PairedTest([("baseline", baseline), ("system", system)], metrics, [references], test, n)
            signatures, scores = paired()
        result = {}
        for name, (base, own) in ((k, v) for k, v in scores.items() if k != "System"):
            result[NAMES[name]] = {"system": own.score, "baseline": base.score, "p_value": float(own.p_value)} | (
                {
                    "system_mean": float(own.mean),
                    "system_ci": float(own.ci),
                    "baseline_mean": float(base.mean),
                    "baseline_ci": float(base.ci),
                }
                if own.mean is not None
                else {}
            )
        out[test] = result | {"signatures": {NAMES[k]: str(v) for k, v in signatures.items()}}
    return out


def interval(values) -> dict:
    """Mean of per-sentence values and its 95% interval by the normal approximation
    (mean ± 1.96·s/√n, s the sample standard deviation); no interval for fewer than 2."""
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    if len(v) < 2:
        return {"mean": mean, "ci95": None, "n": len(v)}
    half = 1.96 * float(v.std(ddof=1)) / math.sqrt(len(v))
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": len(v)}
