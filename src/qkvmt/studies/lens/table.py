"""DecoderLens's table generated from the record: for each model, its latest study under the
current settings (`qkvmt intervene study=lens`, Model.lens_study): BLEU and chrF of the
translations the decoder makes from each encoder depth, against the references and against the
model's own, drawn as study.md draws them (study's `depth_table`)."""

from qkvmt.studies.lens.study import depth_table
from qkvmt.studies.recorded import latest_studies, study_line


def lens(record: dict) -> str:
    latest = latest_studies(record, "lens")
    if not latest:
        return "No DecoderLens study is recorded yet."
    return "\n\n".join(f"{study_line(model, r)}\n\n{depth_table(r['lens'])}" for model, r in latest.items())
