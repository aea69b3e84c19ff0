"""Markdown pieces the record's tables are made of (the table itself: qkvmt.views.markdown): code,
a command, a duration, an optional value, a figure over runs, a class of hardware; and the
command that trains a recipe."""

import re

from qkvmt.record.summary import Stat
from qkvmt.subcommands import COMMANDS


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
