"""A record entry from the output folder of an analysis command: `qkvmt faithfulness`'s
(faithfulness.json: every reading's deletion AOPC and sufficiency, the figures the faithfulness
table reads, its model named in `faithfulness_of`) or `qkvmt align gold_dir=... leaderboard=true`'s
(aer.json: each reading's AER, kept in `aer_readings` for the AER table, its model named in
`aer_of`, and the best of the weights read with and without their sinks as an `alignment` block).

An aer.json from before qkvmt align recorded where it ran is taken to come from the machine that
adds it."""

from pathlib import Path

from qkvmt.analysis.signals import cross_signals
from qkvmt.errors import UserError
from qkvmt.host.machine import recorded_with
from qkvmt.record.from_folder import free_id, read_json
from qkvmt.record.from_study import measured_on, rounded, slug, threads_env
from qkvmt.studies.faithfulness.curves import Reading

NATS = " nats"
OWN = ", own translations"  # how a model forced on its own translations is named beside its teacher-forced self
READING_KEYS = ("signal", "layer", "head", "rows", "direction", "drop", "aer", "precision", "recall", "dev_aer")


def faithfulness_entry(result: dict, of: str | None, taken_ids) -> dict:
    """The entry's own part for a faithfulness.json: its command, the model it names and its figures."""
    own = result.get("target") == "own"
    extra = [f"signals=[{','.join(result['signals'])}]"] if result["signals"] != cross_signals() else []
    extra += ["target=own"] if own else []
    figures = [
        {"label": f"{test}, {r['label']}", "value": round(r[key]["mean"], 3), "unit": NATS}
        for test, key in (("deletion AOPC", "deletion_aopc"), ("sufficiency", "sufficiency"))
        for r in result["readings"]
    ]
    figures.append({"label": "deletion AOPC, random order", "value": round(result["random_aopc"]["mean"], 3)})
    figures.append({"label": "whole command, every signal", "value": round(result["wall_s"]), "unit": "s"})
    forced = "its own translations forced" if own else "the references forced"
    return {
        "id": free_id(f"faithfulness-{slug(result['model'])}" + ("-own" if own else ""), taken_ids),
        "what": (
            f"deletion AOPC and sufficiency of every signal's cross-attention readings, {result['model']}, "
            f"{result['n']} {result['split']} sentences, {result['targets_per_sentence']} target tokens each, {forced}"
        ),
        "command": " ".join(
            [f"{threads_env(result)}qkvmt faithfulness ckpt_path={result['model']}", *extra, f"n={result['n']}"]
        ),
        "faithfulness_of": of or result["model"] + (OWN if own else ""),
        "figures": figures,
    }


def head_means(board: list[dict]) -> list[dict]:
    """Each signal's layers as a whole, with and without the sinks, at the rows and direction the
    leaderboard ranks first for each (it is sorted best first, by dev AER where dev pairs chose)."""
    first = {}
    for row in board:
        if row.get("head") == "mean":
            first.setdefault((row["signal"], row["layer"], tuple(row.get("drop") or ())), row)
    return [{k: row[k] for k in READING_KEYS if k in row} for row in first.values()]


def aer_entry(scores: dict, of: str | None, taken_ids) -> dict:
    """The entry's own part for an aer.json with a leaderboard."""
    model, dev = Path(scores["gold"]["dir"]).name, scores["dev"]
    board = scores.get("leaderboard")
    if not board:
        raise UserError("add= names an aer.json without a leaderboard: record one of qkvmt align leaderboard=true")
    name = of or scores.get("model")
    if not name:
        raise UserError("add= names an aer.json that does not name its model: give of=<the model's name>")
    readings = [
        r | {"label": Reading(r["signal"], r["layer"], tuple(r.get("drop") or ())).label} for r in head_means(board)
    ]

    def best(sink_free: bool) -> float:
        """The test AER (%) of the weights' layer read as a whole that the dev pairs (or the test) chose."""
        weights = [r for r in readings if r["signal"] == "weights" and bool(r.get("drop")) == sink_free]
        return round(100 * min(weights, key=lambda r: r.get("dev_aer", r["aer"]))["aer"], 1)

    pairs, first = scores["gold"]["pairs"], dev["first_pairs"] if dev else 0
    gold = f"{model}, pairs {first + 1}-{pairs}" + (
        f" (pairs 1-{first} choose each reading's rows and direction)" if dev else ""
    )
    top = scores["best"]
    top_label = f"the best head: {Reading(top['signal'], top['layer'], tuple(top.get('drop') or ())).label}"
    command = f"qkvmt align ckpt_path={name} gold_dir=<{model}> leaderboard=true reverse_ckpt_path=null"
    command += f" gold_dev={dev['first_pairs']}" if dev else ""
    return {
        "id": free_id(f"aer-{slug(name)}", taken_ids),
        "what": f"AER of each reading of {name}'s cross-attention against the gold links of {model}",
        "command": command,
        "figures": [{"label": "test pairs", "value": scores["n"]}],
        "aer_of": name,
        "aer_readings": {
            "gold": gold,
            "n": scores["n"],
            "readings": rounded(readings, 4),
            "best": rounded(
                {k: top[k] for k in READING_KEYS if k in top} | {"label": f"{top_label}, head {top['head']}"}, 4
            ),
        },
        "alignment": [
            {
                "gold": gold,
                "command": command,
                "reading": "the weights' best layer as a whole, with every column and without </s> and punctuation",
                "aer": {"weights": best(False), "weights without sinks": best(True)},
            }
        ],
    }


def entry(folder: Path, *, id: str | None = None, of: str | None = None, taken_ids=(), **measured) -> tuple[dict, dict]:
    """(entry, the hardware class it needs) for the faithfulness.json or aer.json in `folder`;
    measured: what from_study.measured_on takes besides the result (hardware, commit, conditions,
    disturbed)."""
    folder = Path(folder)
    if (folder / "faithfulness.json").is_file():
        result = read_json(folder / "faithfulness.json", "")
        own = faithfulness_entry(result, of, taken_ids)
    else:
        result = read_json(folder / "aer.json", "give add= a folder of qkvmt faithfulness or of qkvmt align gold_dir=")
        result = recorded_with() | result  # from before aer.json said where it ran: this machine
        own = aer_entry(result, of, taken_ids)
    run, classes = measured_on(result, **measured)
    own_id = own.pop("id")
    return {"id": id or own_id, **run, **own}, classes
