"""A Markdown table: how results are tabulated as text, in a study's study.md and in
the record's tables (qkvmt.record), which are written with this one function; and the pieces of
their cells: code, a duration, an optional value, a recorded command as it is typed now."""

import re

from qkvmt.cli.table import COMMANDS


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def code(text: str) -> str:
    return f"`{text}`"


def duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def optional(value, fmt=lambda x: f"{x:.2f}", missing: str = "—") -> str:
    return missing if value is None else fmt(value)


SCRIPT = re.compile(r"\bpython3? scripts/(\w+)\.py\b")
SUBCOMMAND = {c.config: c.name for c in COMMANDS.values()}  # scripts/<config>.py is qkvmt <name>'s alias


def command(text: str) -> str:
    """A recorded command as code, written as it is typed now: `python scripts/<name>.py` ran the
    alias of `qkvmt <subcommand>`, the same program."""
    return code(SCRIPT.sub(lambda m: f"qkvmt {SUBCOMMAND.get(m.group(1), m.group(1))}", text))
