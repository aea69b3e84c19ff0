"""Runs grouped as the tables show them, and a figure over a group as mean, range and count.

A group is one recipe (a training run's experiment and overrides; a benchmark's or measurement's
`what`) on one class of hardware with the same number of cores. Only runs made at the recipe's
current settings and not disturbed by other work on the machine are counted: a run at settings
the recipe no longer uses does not say what the recipe gives, and a time-bound recipe sharing its
cores trains fewer steps than it would alone. Such runs stay in the record and are listed apart."""

from dataclasses import dataclass, field

from qkvmt.studies.recorded import counted


def why_not_counted(run: dict) -> str:
    reasons = []
    if not run["settings_current"]:
        reasons.append("earlier settings: " + run.get("settings_note", "the recipe has changed since"))
    if run["disturbed"]:
        reasons.append("disturbed: " + run.get("conditions", "other work shared the machine"))
    return "; ".join(reasons)


@dataclass(frozen=True)
class Stat:
    mean: float
    low: float
    high: float
    n: int


def stat(values) -> Stat | None:
    """Mean, range and count of the values that are known (None is left out); None if none is."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return Stat(sum(known) / len(known), min(known), max(known), len(known))


@dataclass
class Group:
    kind: str
    recipe: str  # the experiment, or what a benchmark or measurement measures
    overrides: tuple[str, ...]
    hardware_class: str
    cores: int | None
    runs: list[dict] = field(default_factory=list)

    def stat(self, get) -> Stat | None:
        return stat(get(r) for r in self.runs)

    def figure(self, label: str) -> tuple[Stat | None, str, bool]:
        """A labelled figure over the group's runs that have it, its unit, and whether it is a
        range measured within a run (several sentences, say), which is shown as a range, never
        averaged."""
        found = [f for r in self.runs for f in r["figures"] if f["label"] == label]
        unit = found[0].get("unit", "") if found else ""
        if any("max" in f for f in found):
            low, high = min(f["value"] for f in found), max(f.get("max", f["value"]) for f in found)
            return Stat((low + high) / 2, low, high, len(found)), unit, True
        return stat(f["value"] for f in found), unit, False

    def labels(self) -> list[str]:
        out = []
        for r in self.runs:
            out += [f["label"] for f in r["figures"] if f["label"] not in out]
        return out


def recipe_of(run: dict) -> str:
    return run["experiment"] if run["kind"] == "train" else run["what"]


def groups(runs: list[dict], kind: str) -> list[Group]:
    """The counted runs of `kind` grouped, in the order each group first appears in the record."""
    found: dict[tuple, Group] = {}
    for run in runs:
        if run["kind"] != kind or not counted(run):
            continue
        key = (recipe_of(run), tuple(run.get("overrides", ())), run["hardware_class"], run["cores"])
        found.setdefault(key, Group(kind, *key)).runs.append(run)
    return list(found.values())
