"""A Markdown table: how results are tabulated as text, in a study's study.md (kv_study) and in
the record's tables (qkvmt.record), which are written with this one function."""


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
