"""A study's recorded runs as its table in the record reads them: whether a run counts (at the
recipe's current settings, undisturbed), each model's latest study, and the line that says what a
study measured and where it ran. The record (qkvmt.record) reads and checks docs/runs.json; each
study's table draws its own figures."""

from qkvmt.results.markdown import command, duration


def counted(run: dict) -> bool:
    return bool(run["settings_current"]) and not run["disturbed"]


def latest_studies(record: dict, key: str) -> dict[str, dict]:
    """{model: its latest entry of the study under `key` (one of qkvmt.record.record_file.STUDIES) at the
    current settings}. What shared the machine bears on the time only, so a disturbed study still
    counts: its line says so."""
    return {r[f"{key}_of"]: r for r in record["runs"] if f"{key}_of" in r and r["settings_current"]}


def study_line(model: str, r: dict) -> str:
    """What a recorded study measured, its command, where and when it ran, and its record id."""
    wall = next((f["value"] for f in r["figures"] if f["label"] == "whole command"), None)
    return (
        f"**{model}**: {r['what']}: {command(r['command'])} ({r['hardware']}; {r['date']}"
        + (f"; {duration(wall)} in all" if wall is not None else "")
        + (f", {r['conditions']}" if r.get("conditions") else "")
        + f"; record {r['id']})"
    )
