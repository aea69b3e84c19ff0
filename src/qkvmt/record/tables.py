"""The Markdown generated from the record: the README's results at a glance and docs/results.md's
tables, and the reference tables of the registries (qkvmt.record.registry). Each function takes the
whole record and returns Markdown; TABLES names them as the pages' marker lines do (None: the
README's `<!-- results:begin -->`)."""

from qkvmt.record import registry
from qkvmt.record.ablation_table import ablations
from qkvmt.record.aer_table import aer_readings
from qkvmt.record.markdown import hardware, spread, train_command
from qkvmt.record.summary import Group, Stat, groups, recipe_of, why_not_counted
from qkvmt.record.vocabulary_table import vocabularies
from qkvmt.results.markdown import code, command, duration, optional, table
from qkvmt.studies.faithfulness.table import faithfulness
from qkvmt.studies.kv.table import kv_study
from qkvmt.studies.lens.table import lens
from qkvmt.studies.patching.table import tracing
from qkvmt.studies.recorded import counted
from qkvmt.studies.sinks.table import sinks

SIGNAL_NAMES = {"weights": "weights", "value_norms": "value norms", "alti": "ALTI+", "attention": "attention"}


def minutes(st: Stat | None) -> str:
    if st is None:
        return "—"
    if st.n == 1:
        return duration(st.mean)
    low, high = round(st.low / 60), round(st.high / 60)
    return f"{low} min" if low == high else f"{low}–{high} min"


def recipe(run: dict) -> str:
    return code(" ".join([run["experiment"], *run["overrides"]]))


def train_columns(g: Group) -> tuple[str, str]:
    """Time and test BLEU over a group; a time known for only some of its runs says so."""
    wall = g.stat(lambda r: r.get("wall_s"))
    time = minutes(wall) + (f" ({wall.n} of {len(g.runs)} runs)" if wall and wall.n < len(g.runs) else "")
    return time, spread(g.stat(lambda r: r["test"]["bleu"]))


def by_recipe(record: dict) -> list[Group]:
    """Training groups, a recipe's variants after it (and each on its hardware in record order)."""
    return sorted(groups(record["runs"], "train"), key=lambda g: (g.recipe, len(g.overrides), g.overrides))


def glance(record: dict) -> str:
    """One row a recipe as documented (no overrides) on one class of hardware."""
    rows = []
    for g in by_recipe(record):
        if g.overrides:
            continue
        time, bleu = train_columns(g)
        rows.append(
            [
                code(g.recipe),
                hardware(record, g.hardware_class, g.cores),
                time,
                bleu,
                str(len(g.runs)),
                command(train_command(g.recipe, g.overrides)),
            ]
        )
    return table(["recipe", "hardware", "time", "test BLEU", "runs", "command"], rows)


def recipes(record: dict) -> str:
    """Every recipe and variant with counted runs: steps, time, BLEU and chrF over its runs."""
    rows = []
    for g in by_recipe(record):
        time, bleu = train_columns(g)
        steps = spread(g.stat(lambda r: r["steps"]), lambda x: f"{x:,.0f}")
        chrf = spread(g.stat(lambda r: r["test"].get("chrf")))
        rows.append(
            [
                command(train_command(g.recipe, g.overrides)),
                hardware(record, g.hardware_class, g.cores),
                steps,
                time,
                bleu,
                chrf,
                str(len(g.runs)),
            ]
        )
    return table(["command", "hardware", "steps", "time", "test BLEU", "chrF", "runs"], rows)


def memory(run: dict) -> str:
    peak = run.get("peak_rss_mib")
    return " / ".join(f"{m:,}" for m in peak) + " MiB" if peak else "—"


def runs(record: dict) -> str:
    """Every counted training run."""
    rows = []
    for r in record["runs"]:
        if r["kind"] != "train" or not counted(r):
            continue
        rows.append(
            [
                r["id"],
                recipe(r),
                r["hardware"],
                r.get("torch") or "—",
                f"{r['steps']:,}",
                optional(r.get("wall_s"), duration),
                optional(r["test"]["bleu"]),
                optional(r["test"].get("chrf")),
                memory(r),
            ]
        )
    return table(["run", "recipe", "machine", "torch", "steps", "time", "test BLEU", "chrF", "peak memory"], rows)


def not_counted(record: dict) -> str:
    """The training runs in no mean: at earlier settings, or disturbed."""
    rows = [
        [
            r["id"],
            command(r["command"]),
            r["hardware"],
            f"{r['steps']:,}",
            optional(r.get("wall_s"), duration),
            optional(r["test"]["bleu"]),
            why_not_counted(r),
        ]
        for r in record["runs"]
        if r["kind"] == "train" and not counted(r)
    ]
    return table(["run", "command", "machine", "steps", "time", "test BLEU", "why it is not counted"], rows)


def signatures(record: dict) -> str:
    """The sacreBLEU signature of each test metric, and how many runs carry it."""
    found: dict[tuple[str, str], int] = {}
    for r in record["runs"]:
        for metric, sig in r.get("test", {}).get("signatures", {}).items():
            found[metric, sig] = found.get((metric, sig), 0) + 1
    return "\n".join(f"- {metric}: {code(sig)} ({n} run{'s' if n > 1 else ''})" for (metric, sig), n in found.items())


def aer_cell(aer: dict) -> str:
    shown = [(k, v) for k, v in aer.items() if k != "eflomal"]
    if len(shown) == 1:
        return f"{shown[0][1]:.1f}"
    return " · ".join(f"{SIGNAL_NAMES.get(k, k)} {v:.1f}" for k, v in shown)


def alignment(record: dict) -> str:
    """Every AER measured on a run's model (and on two runs' models together)."""
    rows = []
    for r in record["runs"]:
        for block in r.get("alignment", []):
            model = r["id"] + (f" with {block['with_run']}" if "with_run" in block else "")
            rows.append(
                [
                    model,
                    block["gold"],
                    block["reading"],
                    aer_cell(block["aer"]),
                    optional(block["aer"].get("eflomal"), lambda x: f"{x:.1f}"),
                    command(block["command"]),
                ]
            )
    return table(["model (run)", "gold pairs", "reading", "AER", "eflomal", "command"], rows)


def number(x: float, decimals: int) -> str:
    return f"{x:,.{decimals}f}"


def figure_cell(st: Stat, unit: str, ranged: bool, decimals: int) -> str:
    if unit == "s" and st.high >= 60:  # minutes read better than hundreds of seconds
        return spread(st, duration, show_n=True)
    attached = unit in ("%", "×")  # written on each number; other units once, at the end
    fmt = (lambda x: number(x, decimals) + unit) if attached else (lambda x: number(x, decimals))
    text = f"{fmt(st.low)}–{fmt(st.high)}" if ranged else spread(st, fmt, show_n=True)
    return text if attached or not unit else f"{text} {unit}"


def decimals_of(values) -> int:
    return max((len(repr(v).split(".")[1]) if isinstance(v, float) else 0) for v in values)


def figures(record: dict, kind: str, shown_in: str | None = None) -> str:
    """For each group of benchmarks or measurements: what, where and how, then its figures (a
    faithfulness measurement's are the faithfulness table's, a study of keys and values' its own);
    then each run at the current settings that other work disturbed, alone, with its conditions
    (runs at earlier settings stay out: their successors are shown). shown_in: the page table of the entries
    that name it in their `shown_in` (None: of those that name none), so a measurement can stand
    beside what it measures."""
    own_tables = ("faithfulness_of", "kv_study_of", "lens_of", "sinks_of", "tracing_of", "aer_of")
    kept = [r for r in record["runs"] if not any(k in r for k in own_tables) and r.get("shown_in") == shown_in]
    parts = [figures_of(g) for g in groups(kept, kind)]
    for r in kept:
        if r["kind"] == kind and r["settings_current"] and r["disturbed"]:
            alone = Group(kind, recipe_of(r), tuple(r.get("overrides", ())), r["hardware_class"], r["cores"], [r])
            parts.append(figures_of(alone, f"not counted: {why_not_counted(r)}"))
    return "\n\n".join(parts)


def figures_of(g: Group, note: str = "") -> str:
    """A group's head (what, where, how many runs, how measured, its command) and its figures."""
    runs_text = f"{len(g.runs)} runs" if len(g.runs) > 1 else "1 run"
    machines = "; ".join(dict.fromkeys(r["hardware"] for r in g.runs))
    head = (
        f"**{g.recipe}** ({machines}; {runs_text}; "
        f"{', '.join(sorted({r['how_measured'] for r in g.runs}))}{'; ' + note if note else ''}): "
        f"{command(g.runs[0]['command'])}"
    )
    rows = []
    for label in g.labels():
        st, unit, ranged = g.figure(label)
        values = [f[k] for r in g.runs for f in r["figures"] if f["label"] == label for k in ("value", "max") if k in f]
        rows.append([label, figure_cell(st, unit, ranged, decimals_of(values))])
    return head + "\n\n" + table(["figure", "measured"], rows)


def methods(record: dict) -> str:
    used = {r["how_measured"] for r in record["runs"]} | (
        {"align"} if any(r.get("alignment") for r in record["runs"]) else set()
    )
    return "\n".join(f"- **{name}**: {text}" for name, text in record["methods"].items() if name in used)


TABLES = {
    None: glance,
    "recipes": recipes,
    "runs": runs,
    "not-counted": not_counted,
    "signatures": signatures,
    "alignment": alignment,
    "benchmarks": lambda record: figures(record, "benchmark"),
    "measurements": lambda record: figures(record, "measurement"),
    "corpus-align": lambda record: figures(record, "measurement", "corpus-align"),
    "serve": lambda record: figures(record, "benchmark", "serve"),
    "corpus": lambda record: figures(record, "benchmark", "corpus"),
    "hooks": lambda record: figures(record, "benchmark", "hooks"),
    "faithfulness": faithfulness,
    "aer-readings": aer_readings,
    "kv-study": kv_study,
    "lens": lens,
    "sinks": sinks,
    "tracing": tracing,
    "ablations": ablations,
    "vocabularies": vocabularies,
    "methods": methods,
    "signals": registry.signals,
    "kinds": registry.kinds,
    "sites": registry.sites,
    "policy": registry.policy,
}
