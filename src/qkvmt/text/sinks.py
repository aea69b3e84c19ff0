"""Attention sinks: tokens that take much of an attention's mass without being a word of the
sentence's content. In trained translation models `</s>`, punctuation and language tags take most
of the cross-attention weight, so a map read as "which source word each target word looks at"
misleads unless that mass is set aside. A sink is named as a class ("punctuation": a token of
punctuation characters only, the word-start mark aside) or as a token itself ("</s>", "__de__")."""

import functools
import unicodedata

import numpy as np

from qkvmt.text.tokenizer import WORD_START

PUNCTUATION = "punctuation"
SINKS = ("</s>", PUNCTUATION)  # what `drop=` leaves out when asked for the usual sinks


@functools.lru_cache(maxsize=1 << 16)  # asked of the same vocabulary's tokens for every map read
def is_punctuation(token: str) -> bool:
    text = token.replace(WORD_START, "")
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def punctuation_columns(tokens: list[str]) -> np.ndarray:
    """(len(tokens),) bool: the tokens of punctuation, and a bare word-start mark before one: the
    tokenizer splits " ." into "▁" and ".", and the mark, a piece of that word, can take weight."""
    marks = [is_punctuation(t) for t in tokens]
    before = [t == WORD_START and i + 1 < len(tokens) and marks[i + 1] for i, t in enumerate(tokens)]
    return np.array(marks, dtype=bool) | np.array(before, dtype=bool)


def sink_columns(tokens: list[str], drop) -> np.ndarray:
    """(len(tokens),) bool: True where the token is one of `drop` (a class name or a token)."""
    drop = (drop,) if isinstance(drop, str) else tuple(drop)
    if not drop or not all(isinstance(d, str) and d for d in drop):
        raise ValueError(f"drop={drop!r}: name tokens to leave out, e.g. drop=('</s>', 'punctuation')")
    literal = np.array([t in set(drop) - {PUNCTUATION} for t in tokens], dtype=bool)
    return literal | punctuation_columns(tokens) if PUNCTUATION in drop else literal


def renormalized_in_place(maps: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """maps (..., rows, cols) with `columns` (bool over cols) set to 0 and each row rescaled to
    its former sum over what is left; the columns stay where they were, so positions that index
    them (a word's subwords) still do. A row whose whole mass was on those columns is left at 0."""
    kept = np.where(columns, 0, maps)
    if kept.size and kept.min() < 0:
        raise ValueError("only maps of shares (no negative values) can be renormalized without some columns")
    before, after = maps.sum(axis=-1, keepdims=True), kept.sum(axis=-1, keepdims=True)
    return kept * np.divide(before, after, out=np.zeros_like(after), where=after > 0)


def mass_on(maps: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """maps (..., rows, cols) -> (...,): their weight on `columns` (bool over cols), summed over
    every row. Over the number of rows, it is the mean share a row puts there: each query counts
    once, however its mass is spread."""
    return maps[..., columns].sum(axis=(-2, -1))


def described(drop) -> str:
    """What a map without the sinks `drop` is, as labels say it: "without </s> and punctuation (renormalized)"."""
    drop = (drop,) if isinstance(drop, str) else tuple(drop)
    named = drop[0] if len(drop) == 1 else f"{', '.join(drop[:-1])} and {drop[-1]}"
    return f"without {named} (renormalized)"


def renormalized_without(maps: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """maps (..., rows, cols) without `columns` (bool over cols), each row rescaled to its former
    sum over what is left: a row of weights sums to 1 again (renormalized_in_place, the columns
    then left out)."""
    return renormalized_in_place(maps, columns)[..., ~columns]
