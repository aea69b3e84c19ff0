"""Markdown pieces the record's own tables are made of (the table, code, a command, a duration and an
optional value: qkvmt.results.markdown, which the studies' tables use too): an override as the shell
needs it, a figure over runs, a class of hardware; and the command that trains a recipe."""

import re

from qkvmt.record.summary import Stat


def quoted(override: str) -> str:
    """An override as a shell line needs it: in double quotes where it names an environment
    variable ($QKVMT_RWTH), which the shell must still expand; else in single quotes where its
    brackets, braces, commas, spaces or Hydra's own ${...} would be the shell's."""
    if re.search(r"\$[A-Za-z_]", override):
        return '"' + re.sub(r'(["\\`])', r"\\\1", override) + '"'
    return f"'{override}'" if re.search(r"[\[\]{} ,]", override) else override


def train_command(experiment: str, overrides) -> str:
    """The command that trains `experiment` with `overrides` (as a recipe's row shows it: a run's
    `overrides` are what the recipe as it is today needs, which its recorded command may not say)."""
    return " ".join(["qkvmt train", f"experiment={experiment}", *map(quoted, overrides)])


def hardware(record: dict, cls: str, cores: int | None) -> str:
    c = record["hardware_classes"][cls]
    return f"{cores} CPU cores, {c['label']}" if c["cpu"] and cores else c["label"]


def spread(st: Stat | None, fmt=lambda x: f"{x:.2f}", show_n: bool = False) -> str:
    """One value, or the mean with the range (and the count) of several."""
    if st is None:
        return "—"
    if st.n == 1:
        return fmt(st.mean)
    if st.low == st.high:
        return fmt(st.mean) + (f" ({st.n} runs)" if show_n else "")
    return f"{fmt(st.mean)} ({fmt(st.low)}–{fmt(st.high)}" + (f"; {st.n} runs)" if show_n else ")")
