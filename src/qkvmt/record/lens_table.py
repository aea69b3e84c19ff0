"""DecoderLens's table generated from the record: for each model, its latest study under the
current settings (`qkvmt intervene study=lens`, Model.lens_study): BLEU and chrF of the
translations the decoder makes from each encoder depth, against the references and against the
model's own. study.md draws the same table (`depth_table`)."""

from qkvmt.record.kv_study_table import study_line


def depth_table(lens: dict) -> str:
    rows = [
        f"| 1..{r['encoder_layers']} | {r['bleu']:.2f} | {r['chrf']:.2f} | {r['chrf_vs_model']:.1f} | "
        f"{100 * r['same_as_model']:.0f}% |"
        for r in lens["depths"]
    ]
    sig = lens["signatures"]
    return "\n".join(
        [
            f"DecoderLens, {lens['n']} sentences of {lens['split']}:",
            "",
            "| the decoder reads encoder layers | BLEU | chrF | chrF against the model's own | same as the model |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"sacreBLEU `{sig['bleu']}`, chrF `{sig['chrf']}`.",
        ]
    )


def lens(record: dict) -> str:
    # What shared the machine bears on the time only, so a disturbed study still shows: its line says so.
    latest = {r["lens_of"]: r for r in record["runs"] if "lens_of" in r and r["settings_current"]}
    if not latest:
        return "No DecoderLens study is recorded yet."
    return "\n\n".join(f"{study_line(model, r)}\n\n{depth_table(r['lens'])}" for model, r in latest.items())
