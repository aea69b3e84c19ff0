"""The table of causal tracing generated from the record: for each model, its latest study under the
current settings (`qkvmt patch`, Model.patch_study): the heat map as patch.md draws it (the share of
the clean–corrupt difference each head restores, by class of positions) and the slices that restore
most."""

from qkvmt.studies.patching.result import heat_table, most_restored
from qkvmt.studies.recorded import latest_studies, study_line


def tracing(record: dict) -> str:
    latest = latest_studies(record, "tracing")
    if not latest:
        return "No causal-tracing study is recorded yet."
    return "\n\n".join(
        "\n\n".join(
            (
                study_line(model, r),
                f"{r['tracing']['n']} pairs of {r['tracing']['given']}, metric {r['tracing']['metric']}, "
                f"heat map from {r['tracing']['heat']['from']}; most restored: {most_restored(r['tracing']['top'])}.",
                heat_table(r["tracing"]["heat"]),
            )
        )
        for model, r in latest.items()
    )
