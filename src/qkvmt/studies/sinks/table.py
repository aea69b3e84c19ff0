"""The table of where cross-attention's mass goes, generated from the record: for each model, its
latest study under the current settings (`qkvmt sinks`, Model.sinks): each layer's heads' average
share on `</s>`, on punctuation and on both, forced on the references and over the model's own
translations, drawn as sinks.md draws it (result's `layer_table`), and, where the study measured
it, each self-attention layer's share on the query's own position (`self_section`)."""

from qkvmt.studies.recorded import latest_studies, study_line
from qkvmt.studies.sinks.result import layer_table, self_section


def sinks(record: dict) -> str:
    latest = latest_studies(record, "sinks")
    if not latest:
        return "No study of where cross-attention's mass goes is recorded yet."
    return "\n\n".join(
        "\n\n".join(filter(None, (study_line(model, r), layer_table(r["sinks"]), self_section(r["sinks"]))))
        for model, r in latest.items()
    )
