"""What a user's text is made of: its visible characters. Every reader of text (files, stdin, a typed sentence,
a request's sentences, a dataset's columns) passes each line through `visible_text`, once, as it comes in.

Invisible characters are characters nobody meant to translate, yet each is a token the model reads: a byte
order mark (U+FEFF, where an editor starts a file, a zero-width no-break space anywhere else) before
"Ein Mann" made the bundled model translate "Memale man ...". So control characters (NUL and the like) and
format characters (U+FEFF, the zero-width space U+200B, the word joiner U+2060, the soft hyphen, direction
marks, ...) are removed wherever they stand. The zero-width non-joiner and joiner (U+200C, U+200D) are kept
inside a word, where they are spelling in Persian and Indic scripts and join emoji. Visible text is never
changed otherwise (no Unicode normalisation: it would alter training text). A line left with no visible
character is an empty line, however each command treats one.
"""

import re
import unicodedata

JOINERS = "\u200c\u200d"  # the zero-width non-joiner and joiner: kept between visible characters
LOOSE_JOINERS = re.compile(f"(?<!\\S)[{JOINERS}]+|[{JOINERS}]+(?!\\S)")  # at a word's edge: they join nothing


def visible_text(text: str) -> str:
    """`text` without its control and format characters (whitespace and the joiners inside words aside) and the
    whitespace at its ends; "" if that leaves no visible character."""
    text = text.strip()
    if text.isprintable():  # no control or format character: most lines, at C speed
        return text
    kept = "".join(c for c in text if c.isspace() or c in JOINERS or unicodedata.category(c) not in ("Cc", "Cf"))
    return LOOSE_JOINERS.sub("", kept).strip()
