"""The tables of the study of keys and values generated from the record: for each model, its
latest study under the current settings (qkvmt.record.from_study), where and how it ran (what else ran beside it
bears on the time, not on the figures), and its tables as study.md draws them
(qkvmt.studies.kv.result)."""

from qkvmt.studies.kv.result import tables
from qkvmt.studies.recorded import latest_studies, study_line


def kv_study(record: dict) -> str:
    latest = latest_studies(record, "kv_study")
    if not latest:
        return "No study of keys and values is recorded yet."
    return "\n\n".join(f"{study_line(model, r)}\n\n{tables(r['kv_study'])}" for model, r in latest.items())
