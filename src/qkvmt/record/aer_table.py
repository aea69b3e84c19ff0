"""The AER table generated from the record: for each model, its latest counted measurement of
`qkvmt align gold_dir=... leaderboard=true` (qkvmt.record.from_analysis), each signal's decoder
layers read as a whole, the attention weights also without `</s>` and punctuation, at the rows and
direction chosen for each, with the test AER, precision and recall; last, the best reading of
any head."""

from qkvmt.results.markdown import command, optional, table
from qkvmt.studies.recorded import counted


def percent(x: float | None) -> str:
    return optional(x, lambda v: f"{100 * v:.1f}")


def aer_readings(record: dict) -> str:
    latest = {r["aer_of"]: r for r in record["runs"] if "aer_of" in r and counted(r)}
    if not latest:
        return "No AER measurement of each reading is recorded yet."
    parts = []
    for model, r in latest.items():
        found = r["aer_readings"]
        rows = [
            [
                x["label"],
                f"{x['rows']}, {x['direction']}",
                percent(x.get("dev_aer")),
                percent(x["aer"]),
                percent(x["precision"]),
                percent(x["recall"]),
            ]
            for x in [*found["readings"], found["best"]]
        ]
        head = (
            f"**{model}** on {found['gold']} ({r['hardware']}; {r['date']}; record {r['id']}): {command(r['command'])}"
        )
        header = ["reading (a layer as a whole)", "rows, direction", "dev AER", "AER ↓", "precision", "recall"]
        parts.append(head + "\n\n" + table(header, rows))
    return "\n\n".join(parts)
