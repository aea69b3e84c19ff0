"""One edit of the study summed up over its sentences: how often each outcome came about, how far
the edited translations are from the originals (chrF, sacreBLEU), how much the original
translation's tokens lost in log-probability, and where the rows that wrote word A's
translation looked, before and after.

Means are over sentences (a long sentence counts once, like a short one), with the 95% interval
of qkvmt.text.significance.interval.
"""

from collections.abc import Callable

import numpy as np

from qkvmt.studies.kv.passes import Pass, Sentence
from qkvmt.text.metrics import score
from qkvmt.text.significance import interval
from qkvmt.text.tokenizer import decode


def rates(outcomes: list[str], names: tuple[str, ...]) -> dict[str, float]:
    """The share of sentences with each outcome."""
    return {name: sum(o == name for o in outcomes) / len(outcomes) for name in names}


def chrf(originals: list[str], edited: list[str]) -> dict:
    """chrF of the edited translations against the originals, and its sacreBLEU signature."""
    scored = score(edited, originals)
    return {"chrf": scored["chrf"], "signature": scored["signatures"]["chrf"]}


def log_prob_change(passes: list[Pass], before: list[Pass]) -> dict:
    """Each sentence's mean change of log p per original token (nats), over sentences."""
    return interval([float(np.mean(p.log_prob - b.log_prob)) for p, b in zip(passes, before)])


def largest_difference(passes: list[Pass], others: list[Pass]) -> float:
    """The largest change of any original token's log p between two edits (or an edit and none)."""
    return max(float(np.abs(p.log_prob - o.log_prob).max()) for p, o in zip(passes, others))


def same_translation(passes: list[Pass], others: list[Pass] | list[list[int]]) -> float:
    """The share of sentences whose edited translation is the other's (a Pass's, or given ids)."""
    other_ids = [o.edited if isinstance(o, Pass) else o for o in others]
    return sum(p.edited == o for p, o in zip(passes, other_ids)) / len(passes)


def shares(
    sentences: list[Sentence], passes: list[Pass], before: list[Pass], at: dict[str, Callable[[Sentence], int]]
) -> list[dict]:
    """Per layer, the mean share of A's rows' cross-attention (heads and rows averaged) on each
    named source position, before the edit and after it."""
    layers = before[0].row_map.shape[0]
    return [
        {
            name: {
                when: float(np.mean([r.row_map[layer, get(s)] for s, r in zip(sentences, results)]))
                for when, results in (("before", before), ("after", passes))
            }
            for name, get in at.items()
        }
        for layer in range(layers)
    ]


def condition(
    tokenizer,
    sentences: list[Sentence],
    passes: list[Pass],
    before: list[Pass],
    outcomes: list[str],
    names: tuple[str, ...],
    at: dict[str, Callable[[Sentence], int]],
) -> dict:
    """Everything one edit is reported by."""
    edited = decode(tokenizer, [p.edited for p in passes])
    return {
        "n": len(sentences),
        "outcomes": rates(outcomes, names),
        "unchanged": same_translation(passes, [s.original for s in sentences]),
        **chrf([s.translation for s in sentences], edited),
        "log_prob_change": log_prob_change(passes, before),
        "shares": shares(sentences, passes, before, at),
    }
