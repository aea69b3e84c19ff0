"""figures(cfg): every figure docs/attention.md shows, the numbers its text states of its sentence
(attention_numbers.json) and the explorer's screenshot the README shows, drawn from one model (the
bundled multi30k-de-en by default) for the tutorial's sentence through the Python API, so a
reader's own `model.attention(...)` gives the numbers they plot. Rerun it after the bundled model
or a view changes: on one machine it writes the same files. It also runs the tour notebook
(`tour=`) again and saves it with its outputs (qkvmt.pipeline.tour)."""

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from qkvmt.analysis.inspection import checked_kind
from qkvmt.analysis.signals import SIGNALS
from qkvmt.errors import UserError
from qkvmt.explore.screenshot import Unavailable, screenshot
from qkvmt.pipeline import tour
from qkvmt.pipeline.inference_setup import load_for_inference
from qkvmt.record.study_figures import draw_lens, draw_self, draw_sinks, draw_tracing
from qkvmt.results.tutorial import draw
from qkvmt.setting_types import as_typed, whole_number
from qkvmt.text.sources import required_text

log = logging.getLogger(__name__)


def check_places(cfg: DictConfig) -> None:
    """The head, the tokens and the explorer's view the figures read, checked before the model
    loads; a bad view would otherwise stall the browser after every other figure was drawn. Each
    index may count from the end, but the view's selectors count from 0 (head: or mean); the
    model and the sentence bound them once they load."""
    checked_kind(cfg.head.kind, "head.kind")
    for key in ("head.layer", "head.head", "patch.position", "swap.a", "swap.b"):
        whole_number(key, OmegaConf.select(cfg, key), least=None)
    if cfg.explorer:
        view = cfg.explorer
        checked_kind(view.kind, "explorer.kind")
        if view.signal not in SIGNALS:
            raise UserError(f"explorer.signal={as_typed(view.signal)}: use one of {', '.join(SIGNALS)}")
        whole_number("explorer.layer", view.layer, least=0)
        if view.head != "mean":
            whole_number("explorer.head", view.head, least=0)


def figures(cfg: DictConfig) -> dict:
    sentence, reference = required_text(cfg.sentence, "sentence"), required_text(cfg.reference, "reference")
    patch = {"donor": required_text(cfg.patch.donor, "patch.donor"), "position": cfg.patch.position}
    if not cfg.output_dir:
        raise UserError("output_dir is empty: give the folder for the figures, e.g. output_dir=docs/figures")
    check_places(cfg)
    model = load_for_inference(cfg)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)  # once the model loads: a refused command leaves no folder
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
    if cfg.self_record:
        files["self_attention.png"] = draw_self(Path(cfg.self_record), out / "self_attention.png")
    if cfg.tracing_record:
        files["tracing.png"] = draw_tracing(Path(cfg.tracing_record), out / "tracing.png")
    if cfg.tour:
        try:
            files["tour.ipynb"] = tour.run_tour(cfg.tour)
        except tour.Unavailable as e:
            left_out["tour.ipynb"] = str(e)
            log.warning("left out tour.ipynb: %s", e)
    for path in files.values():
        print(f"wrote {path}")
    return {"output_dir": str(out), "files": {name: str(path) for name, path in files.items()}, "left_out": left_out}
