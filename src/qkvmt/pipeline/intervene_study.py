"""study(cfg): what keys and values are for, measured on a split (Model.study): the swap study,
the patch study or both, written as study.json, study.md and sentences.jsonl."""

import time
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.inference_setup import check_output_dir, decode_overrides, load_for_inference, save_result
from qkvmt.studies.checks import STUDIES, checked_study
from qkvmt.text.sources import read_lines

__all__ = ["STUDIES", "study"]  # qkvmt.pipeline.intervene reads the studies' names here


def sources(cfg: DictConfig, model) -> tuple[list[str], str]:
    """The source lines and a short name for them: src_file alone, or what read_inputs reads."""
    if cfg.src_file and not cfg.ref_file:
        return read_lines(Path(cfg.src_file)), Path(cfg.src_file).name.removesuffix(".gz")
    src, _, name = read_inputs(cfg, model.meta, model.paths[0])
    return src, name


def study(cfg: DictConfig) -> dict:
    start = time.time()
    checked_study(cfg.study, cfg.n, cfg.substitutes)  # before the slow load
    decode = decode_overrides(cfg.decode)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    lines, name = sources(cfg, model)
    found = model.study(lines, cfg.study, cfg.n, cfg.substitutes, name, **decode)
    found.result["wall_s"] = round(time.time() - start, 1)  # the whole command's, loading included
    final = save_result(cfg, model.paths, found, name, "kv_study")
    print(found.summary() + f"; wrote {final}")
    return found.result | {"output_dir": str(final)}
