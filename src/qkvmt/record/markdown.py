"""Markdown pieces the record's tables are made of: a table, code, a duration, an optional value."""


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
