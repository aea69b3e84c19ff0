"""The regions of a Markdown page that the record writes: the lines between
`<!-- results:NAME:begin -->` and `<!-- results:NAME:end -->`, NAME a table of
qkvmt.record.tables (the README's one region is `<!-- results:begin -->` ... `<!-- results:end -->`).
Everything outside them is the page's own text and is left as it is."""

import re

from qkvmt.errors import UserError
from qkvmt.record.tables import TABLES

BEGIN = re.compile(r"<!-- results(?::([a-z-]+))?:begin -->")


def marker(name: str | None, end: str) -> str:
    return f"<!-- results{':' + name if name else ''}:{end} -->"


def regions(text: str, where: str) -> list[tuple[str | None, int, int]]:
    """(table name, start, end) of each region's content, in page order."""
    found = []
    for m in BEGIN.finditer(text):
        name = m.group(1)
        close = text.find(marker(name, "end"), m.end())
        if close < 0:
            raise UserError(f"{where}: {m.group(0)} has no {marker(name, 'end')} after it: add the end line")
        if name not in TABLES:
            raise UserError(f"{where}: {m.group(0)} names no table; the tables are {', '.join(filter(None, TABLES))}")
        found.append((name, m.end(), close))
    return found


def render(text: str, record: dict, where: str, required: tuple = ()) -> str:
    """The page with every region holding its table as the record gives it now."""
    found = regions(text, where)
    missing = [n for n in required if n not in {name for name, _, _ in found}]
    if missing:
        lines = ", ".join(f"{marker(n, 'begin')} ... {marker(n, 'end')}" for n in missing)
        raise UserError(f"{where} has no lines {lines}: add them where the table goes, then run qkvmt results again")
    out, at = [], 0
    for name, start, end in found:
        out += [text[at:start], "\n\n", TABLES[name](record), "\n\n"]
        at = end
    return "".join(out + [text[at:]])
