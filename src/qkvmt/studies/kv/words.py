"""Which source words the study edits, and what became of their translations.

A source word qualifies when the model translates it, as its own alignment reads it
(`Model.align`'s links on its own translation): the word is one subword token (so one key and
one value hold it), alphabetic and not a function word, and of the target words linked to it
exactly one is alphabetic and not a function word, and found once in the translation (so it
can be looked for in an edited translation). Linked function words are passed over: the
alignment often links an article to the noun after it ("A" to "Mann"). The swap study takes a
sentence's first two such words.

Words are compared in a normal form: lower case, without the punctuation a tokenizer's word
carries ("grass." is "grass").
"""

from dataclasses import dataclass

# Function words, by language: words whose translation is grammar (an article, a preposition)
# rather than the word's meaning, and which recur in a sentence, so their place says little.
FUNCTION_WORDS = {
    "en": frozenset(
        """a an the and or but nor so yet if then than as that this these those there here it its he she they
        them his her hers him their theirs we us our you your i me my is are was were be been being am has have
        had do does did not no of in on at to for with by from up down out off over under into onto through
        across along around behind beside besides between near past toward towards while who whom whose which
        what where when how why all each both other another some any very also just about against before after
        above below during without within beneath next inside outside upon atop among amongst can will would
        could should may might must one something someone""".split()
    ),
    "de": frozenset(
        """der die das den dem des ein eine einen einem einer eines und oder aber sondern denn in im ins an am
        ans auf aus bei beim mit nach von vom vor zu zum zur über unter hinter neben zwischen durch für gegen
        ohne um während bis seit entlang gegenüber innerhalb außerhalb ist sind war waren sein seine seinem
        seinen seiner seines hat haben hatte hatten wird werden wurde wurden er sie es ihr ihre ihrem ihren
        ihrer ihres sich man wir uns ich mich mir du dich dir welche welcher welches wer was wo wie dass daß als
        wenn ob weil nicht kein keine keinen etwas jemand dieser diese dieses diesem diesen alle einige viele
        andere anderen anderer sehr auch noch schon nur hier dort da dabei darauf daneben davor dahinter""".split()
    ),
}


def normal(word: str) -> str:
    """The word as compared: lower case, punctuation at either end removed."""
    start, end = 0, len(word)
    while start < end and not word[start].isalpha():
        start += 1
    while end > start and not word[end - 1].isalpha():
        end -= 1
    return word[start:end].lower()


def content(word: str, lang: str) -> bool:
    """Alphabetic and not a function word of `lang` (a language without a list: alphabetic)."""
    return word.isalpha() and word.lower() not in FUNCTION_WORDS.get(lang, frozenset())


@dataclass(frozen=True)
class Word:
    """A source word the model translates, and its translation."""

    index: int  # the source word's index (Pharaoh numbering)
    position: int  # its one subword's source token position: the key and value an edit moves
    text: str  # as in the source
    target: str  # the linked target word, normal form
    rows: tuple[int, ...]  # the output-token rows of the linked target word: the queries that wrote it


def translated_words(alignment, src_lang: str, tgt_lang: str) -> list[Word]:
    """The qualifying source words of one sentence's alignment (the WordAlignment of the model's
    own translation, passes.aligned), in source order."""
    targets = [normal(w) for w in alignment.tgt_words]
    out = []
    for i, (text, group) in enumerate(zip(alignment.src_words, alignment.src_groups)):
        linked = [j for s, j in alignment.links if s == i and content(targets[j], tgt_lang)]
        if len(group) != 1 or not content(text, src_lang) or len(linked) != 1:
            continue
        (j,) = linked
        if targets.count(targets[j]) != 1:
            continue
        out.append(Word(i, group[0], text, targets[j], tuple(alignment.tgt_groups[j])))
    return out


def first_pair(words: list[Word]) -> tuple[Word, Word] | None:
    """The first two words whose translations differ, or None."""
    for k, a in enumerate(words):
        for b in words[k + 1 :]:
            if b.target != a.target:
                return a, b
    return None


def where(word: str, text: str) -> int | None:
    """The index of the first word of `text` whose normal form is `word`, or None."""
    words = [normal(w) for w in text.split()]
    return words.index(word) if word in words else None


SWAP_OUTCOMES = ("traded", "kept", "changed")


def swap_outcome(a: str, b: str, original: str, edited: str) -> str:
    """What a swap of two words did to their translations a and b (normal forms, each found in
    `original`): "traded" (both in `edited`, in the other order), "kept" (both, in the same
    order), or "changed" (one or both missing)."""
    before = where(a, original) < where(b, original)
    at_a, at_b = where(a, edited), where(b, edited)
    if at_a is None or at_b is None:
        return "changed"
    return "kept" if (at_a < at_b) == before else "traded"


PATCH_OUTCOMES = ("donor", "original", "other")


def patch_outcome(own: str, donors: str, edited: str) -> str:
    """Whose word an edited translation carries, of the sentence's own word's translation `own`
    and the donor's `donors` (normal forms): "donor" (its word and not the own), "original" (the
    own and not the donor's), "other" (both, or neither)."""
    has_own, has_donors = where(own, edited) is not None, where(donors, edited) is not None
    if has_donors and not has_own:
        return "donor"
    return "original" if has_own and not has_donors else "other"
