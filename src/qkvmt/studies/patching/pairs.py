"""Clean and corrupt sources made ready for patching: each pair's tokens, where they differ, both
translations, and the target position and tokens its metric reads.

Patching puts a clean activation where a corrupt one was, position for position, so the two sources
must split into as many tokens (*Ein Mann* / *Eine Frau* may not: Eine can be two subwords). A pair
that does not is refused, naming it, unless `unequal="skip"` says to leave it out. The metric reads
the first target position where the two translations differ: the clean translation's token there
(and the corrupt one's), over the clean translation's prefix; a pair whose translations agree has
nothing to restore and is left out, said in the result.
"""

import re
from dataclasses import dataclass

from qkvmt.errors import UserError
from qkvmt.text.tokenizer import encode

UNEQUAL = ("error", "skip")  # what a pair of different token lengths does


@dataclass(frozen=True)
class Pair:
    index: int  # its place among the pairs given
    clean: str
    corrupt: str
    clean_ids: list[int]  # source subword ids, no </s>
    corrupt_ids: list[int]
    prefix: list[int]  # the clean translation's ids before the metric's position
    clean_token: int  # the clean translation's token at that position (</s> where it ends there)
    corrupt_token: int  # the corrupt translation's token there

    @property
    def changed(self) -> list[int]:
        """The source positions whose tokens differ."""
        return [i for i, (a, b) in enumerate(zip(self.clean_ids, self.corrupt_ids)) if a != b]

    @property
    def position(self) -> int:
        """The target position the metric reads (the row predicting the differing token)."""
        return len(self.prefix)


def swapped_word_pairs(
    lines, words: dict[str, str], before: dict[str, str] | None = None, only_after: bool = False
) -> tuple[list[str], list[str]]:
    """(clean, corrupt) pairs made of `lines`: each line holding a word of `words` (whole words, as
    written), and the line with each such word replaced by its value and, where the word just before
    it is a key of `before`, that one replaced too (an article agreeing with the new word). Lines
    without such a word are left out. E.g. words={"Mann": "Frau"}, before={"Ein": "Eine", "der": "die"}:
    "Ein Mann schläft ." -> "Eine Frau schläft .". only_after: keep only lines whose every such word
    follows a key of `before` (where another word stands before it, "dem alten Mann", replacing the
    word alone would leave the sentence ungrammatical)."""
    before = before or {}
    alternatives = "|".join(map(re.escape, sorted(words, key=len, reverse=True)))
    articles = "|".join(map(re.escape, sorted(before, key=len, reverse=True))) or "(?!)"  # none: never
    pattern = re.compile(rf"(?:\b({articles})(\s+))?\b({alternatives})\b")

    def swapped(match: re.Match) -> str:
        article, space, word = match.groups()
        return (f"{before[article]}{space}" if article else "") + words[word]

    clean, corrupt = [], []
    for line in lines:
        if only_after and any(m.group(1) is None for m in pattern.finditer(line)):
            continue
        changed = pattern.sub(swapped, line)
        if changed != line:
            clean.append(line)
            corrupt.append(changed)
    return clean, corrupt


def checked_texts(clean, corrupt) -> tuple[list[str], list[str]]:
    """Two lists of texts of one length, or a one-line UserError."""
    lists = []
    for name, texts in (("clean", clean), ("corrupt", corrupt)):
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            raise UserError(f"{name}: give a list of source texts")
        lists.append(list(texts))
    if len(lists[0]) != len(lists[1]):
        raise UserError(f"{len(lists[0])} clean and {len(lists[1])} corrupt sources: give a corrupt one per clean one")
    if not lists[0]:
        raise UserError("no pairs: give clean and corrupt sources, e.g. ['Ein Mann schläft .'], ['Ein Hund schläft .']")
    return lists[0], lists[1]


def aligned(tokenizer, clean: list[str], corrupt: list[str], unequal: str) -> tuple[list[tuple], dict]:
    """(index, clean, corrupt, clean ids, corrupt ids) of each pair of as many tokens that differ, and
    {index: why} for those left out; a pair of different lengths is a UserError unless unequal="skip"."""
    if unequal not in UNEQUAL:
        raise UserError(f"unequal={unequal!r}: use one of {', '.join(UNEQUAL)}")
    kept, left = [], {}
    for i, (a, b, ids_a, ids_b) in enumerate(zip(clean, corrupt, encode(tokenizer, clean), encode(tokenizer, corrupt))):
        if len(ids_a) != len(ids_b):
            if unequal == "error":
                raise UserError(
                    f"pair {i}: {a!r} splits into {len(ids_a)} tokens and {b!r} into {len(ids_b)}; patching puts "
                    "activations position for position: give sources of as many tokens, or unequal=skip"
                )
            left[i] = f"{len(ids_a)} and {len(ids_b)} tokens"
        elif ids_a == ids_b:
            left[i] = "the same tokens"
        else:
            kept.append((i, a, b, ids_a, ids_b))
    return kept, left


def with_targets(kept: list[tuple], clean_out: list[list[int]], corrupt_out: list[list[int]], eos: int, left: dict):
    """The Pairs of `kept` whose translations (ids, no </s>) differ, at their first differing token."""
    pairs = []
    for (i, a, b, ids_a, ids_b), y, z in zip(kept, clean_out, corrupt_out):
        y_end, z_end = [*y, eos], [*z, eos]
        at = next((t for t, (u, w) in enumerate(zip(y_end, z_end)) if u != w), None)
        if at is None:
            left[i] = "the same translation"
            continue
        pairs.append(Pair(i, a, b, ids_a, ids_b, y[:at], y_end[at], z_end[at]))
    return pairs
