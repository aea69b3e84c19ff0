"""figures(cfg): every figure docs/attention.md shows, the numbers its text states of its sentence
(attention_numbers.json) and the explorer's screenshot the README shows, drawn from one model (the
bundled multi30k-de-en by default) for the tutorial's sentence through the Python API, so a
reader's own `model.attention(...)` gives the numbers they plot. Rerun it after the bundled model
or a view changes: on one machine it writes the same files. It also runs the tour notebook
(`tour=`) again and saves it with its outputs (qkvmt.pipeline.tour)."""

import logging
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.explore.screenshot import Unavailable, screenshot
from qkvmt.pipeline import tour
from qkvmt.pipeline.runs import load_for_inference
from qkvmt.record import runs
from qkvmt.text.sources import required_text
from qkvmt.views.figures import depth_plot
from qkvmt.views.sinks import sink_plot
from qkvmt.views.tutorial import draw

log = logging.getLogger(__name__)


def figures(cfg: DictConfig) -> dict:
    sentence, reference = required_text(cfg.sentence, "sentence"), required_text(cfg.reference, "reference")
    patch = {"donor": required_text(cfg.patch.donor, "patch.donor"), "position": cfg.patch.position}
    if not cfg.output_dir:
        raise UserError("output_dir is empty: give the folder for the figures, e.g. output_dir=docs/figures")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = load_for_inference(cfg)
    files = draw(model, sentence, reference, out, dict(cfg.head), dict(cfg.swap), patch)
    left_out = {}
    if cfg.explorer:
        try:
            view = dict(cfg.explorer)
            typed = required_text(view.pop("sentence"), "explorer.sentence")
            files["explorer.png"] = screenshot(model, typed, out / "explorer.png", view)
        except Unavailable as e:
            left_out["explorer.png"] = str(e)
            log.warning("left out explorer.png: %s", e)
    if cfg.lens_record:
        files["decoder_lens.png"] = draw_lens(Path(cfg.lens_record), out / "decoder_lens.png")
    if cfg.sinks_record:
        files["sinks.png"] = draw_sinks(Path(cfg.sinks_record), out / "sinks.png")
    if cfg.tour:
        try:
            files["tour.ipynb"] = tour.run_tour(cfg.tour)
        except tour.Unavailable as e:
            left_out["tour.ipynb"] = str(e)
            log.warning("left out tour.ipynb: %s", e)
    for path in files.values():
        print(f"wrote {path}")
    return {"output_dir": str(out), "files": {name: str(path) for name, path in files.items()}, "left_out": left_out}


def recorded(record_path: Path, setting: str, key: str, what: str, command: str) -> dict[str, dict]:
    """{model: the figures of its latest study under `key`} from the record `setting` names."""
    if not record_path.is_file():
        raise UserError(f"{setting}={record_path}: no such file; give the record of runs (docs/runs.json) or null")
    studies = {model: r[key] for model, r in runs.latest_studies(runs.load(record_path), key).items()}
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
