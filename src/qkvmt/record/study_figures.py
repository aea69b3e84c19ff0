"""The figures drawn from the record of runs rather than from a model: each model's latest study of
one kind under the current settings (qkvmt.studies.recorded.latest_studies), for `qkvmt figures`."""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.record import record_file
from qkvmt.studies.lens.study import depth_plot
from qkvmt.studies.patching.result import heat_map
from qkvmt.studies.recorded import latest_studies
from qkvmt.studies.sinks.result import self_plot, sink_plot


def recorded(record_path: Path, setting: str, key: str, what: str, command: str) -> dict[str, dict]:
    """{model: the figures of its latest study under `key`} from the record `setting` names."""
    if not record_path.is_file():
        raise UserError(f"{setting}={record_path}: no such file; give the record of runs (docs/runs.json) or null")
    studies = {model: r[key] for model, r in latest_studies(record_file.load(record_path), key).items()}
    if not studies:
        raise UserError(f"{record_path} records no {what}: run {command}, then add it")
    return studies


def draw_lens(record_path: Path, path: Path) -> Path:
    """chrF per encoder depth of every model's latest DecoderLens study in the record."""
    studies = recorded(record_path, "lens_record", "lens", "DecoderLens study", "qkvmt intervene study=lens")
    split = next(iter(studies.values()))["split"]
    depth_plot(studies, path, title=f"DecoderLens, {split}")
    return path


def draw_sinks(record_path: Path, path: Path) -> Path:
    """Each cross head's share on the sinks, both readings, of every model's latest study in the record."""
    studies = recorded(record_path, "sinks_record", "sinks", "study of the sinks", "qkvmt sinks")
    split = next(iter(studies.values()))["split"]
    sink_plot(studies, path, title=f"Where cross-attention's mass goes, {split}")
    return path


def draw_self(record_path: Path, path: Path) -> Path:
    """Each self-attention layer's share on the query's own position, of every model whose latest
    study of the sinks in the record measured it."""
    studies = recorded(record_path, "self_record", "sinks", "study of the sinks", "qkvmt sinks")
    measured = {model: study for model, study in studies.items() if "self" in study}
    if not measured:
        what = "study of self-attention's own position"
        raise UserError(f"{record_path} records no {what}: run qkvmt sinks, then add it")
    split = next(iter(measured.values()))["split"]
    self_plot(measured, path, title=f"Self-attention on each token's own position, {split}")
    return path


def draw_tracing(record_path: Path, path: Path) -> Path:
    """The heat map of the record's latest causal-tracing study (of the model recorded last)."""
    studies = recorded(record_path, "tracing_record", "tracing", "causal-tracing study", "qkvmt patch")
    model, study = list(studies.items())[-1]
    heat_map(study["heat"], path, title=f"Share restored by patching, {model}, {study['split']} ({study['n']} pairs)")
    return path
