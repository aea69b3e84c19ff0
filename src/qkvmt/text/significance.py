"""Is one system's score different from another's by more than chance? sacreBLEU's paired tests,
run by the library itself: paired bootstrap resampling (Koehn 2004), which also estimates each
system's true mean and 95% confidence interval, and approximate randomization (Riezler and Maxwell
2005). The results and signatures are those of `sacrebleu REF -i BASELINE SYSTEM --paired-bs`
(or `--paired-ar`) with the same seed."""

import contextlib
import os

import sacrebleu
from sacrebleu.significance import PairedTest

from qkvmt.errors import UserError
from qkvmt.text.metrics import DEFAULT_TOKENIZE, bleu_metric, forgets_tokenized_lines

TESTS = {"bs": "paired bootstrap resampling", "ar": "approximate randomization"}
SAMPLES = {"bs": 1000, "ar": 10000}  # sacreBLEU's own defaults: resamples, trials
NAMES = {"BLEU": "bleu", "chrF2": "chrf"}  # sacreBLEU's names of the scores -> ours


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
    """The tests asked for (names of TESTS) -> their number of resamples or trials."""
    tests = [tests] if isinstance(tests, str) else list(tests)
    unknown = [t for t in tests if t not in TESTS]
    if not tests or unknown:
        raise UserError(f"significance.tests={tests}: name some of {', '.join(TESTS)} ({', '.join(TESTS.values())})")
    samples = SAMPLES | (samples or {})
    bad = [t for t in tests if isinstance(samples[t], bool) or not isinstance(samples[t], int) or samples[t] < 1]
    if bad:
        raise UserError(f"significance.samples.{bad[0]}={samples[bad[0]]!r}: give a whole number of at least 1")
    return {t: samples[t] for t in tests}


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
    runs = checked_tests(tests, samples)
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
