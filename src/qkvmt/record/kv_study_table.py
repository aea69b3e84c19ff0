"""The tables of the study of keys and values generated from the record: for each model, its
latest study under the current settings (qkvmt.record.from_study), where and how it ran (what else ran beside it
bears on the time, not on the figures), and its tables as study.md draws them
(qkvmt.views.kv_study)."""

from qkvmt.record.markdown import command, duration
from qkvmt.record.runs import latest_studies
from qkvmt.views.kv_study import tables


def kv_study(record: dict) -> str:
    latest = latest_studies(record, "kv_study")
    if not latest:
        return "No study of keys and values is recorded yet."
    return "\n\n".join(f"{study_line(model, r)}\n\n{tables(r['kv_study'])}" for model, r in latest.items())


def study_line(model: str, r: dict) -> str:
    """What a recorded study measured, its command, where and when it ran, and its record id."""
    wall = next((f["value"] for f in r["figures"] if f["label"] == "whole command"), None)
    return (
        f"**{model}**: {r['what']}: {command(r['command'])} ({r['hardware']}; {r['date']}"
        + (f"; {duration(wall)} in all" if wall is not None else "")
        + (f", {r['conditions']}" if r.get("conditions") else "")
        + f"; record {r['id']})"
    )
