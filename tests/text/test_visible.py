"""A line's visible text: invisible characters removed wherever they stand, visible text as it was."""

import sys
import unicodedata

import pytest

from qkvmt.text.visible import JOINERS, visible_text

SENTENCE = "Ein älterer Mann sitzt auf einer Bank im Park ."
# Visible text a reader must leave as it is: accents composed and decomposed, a no-break space inside,
# full-width letters, an emoji with its presentation selector, a Persian word spelled with a non-joiner,
# and a family emoji whose people the joiner makes one picture
VISIBLE = [
    SENTENCE,
    "Cafe\u0301 au lait",
    "100\u00a0km",
    "ＡＢＣ ist breit",
    "Ich \u2764\ufe0f Berlin",
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467 im Park",
]
INVISIBLE = "".join(
    c
    for c in map(chr, range(sys.maxunicode + 1))
    if unicodedata.category(c) in ("Cc", "Cf") and not c.isspace() and c not in JOINERS
)


@pytest.mark.parametrize("text", VISIBLE)
def test_visible_text_is_left_as_it_is_but_for_the_whitespace_at_its_ends(text):
    assert visible_text(f" {text}\t\r") == text


def test_every_control_and_format_character_is_removed_wherever_it_stands():
    words = SENTENCE.split()
    for c in INVISIBLE:
        hidden = f"{c}{words[0]} {c}{words[1][:2]}{c}{words[1][2:]}{c} " + " ".join(words[2:]) + c
        assert visible_text(hidden) == SENTENCE, f"U+{ord(c):04X}"


def test_a_line_of_invisible_characters_whitespace_and_joiners_has_no_text():
    assert visible_text(INVISIBLE + " \t\u3000" + JOINERS + INVISIBLE[::-1]) == ""
    assert all(visible_text(c + c) == "" for c in INVISIBLE + JOINERS)


def test_a_joiner_is_kept_inside_a_word_and_dropped_where_it_joins_nothing():
    persian, family = VISIBLE[5], VISIBLE[6]
    assert visible_text(f"\u200d{persian}\u200c {JOINERS} {family}\u200c") == f"{persian}  {family}"
