"""lens_study(cfg): what each encoder layer already knows, on a split (`qkvmt intervene
study=lens`, Model.lens_study): each encoder depth's translations scored against the references
and against the model's own, written as study.json, study.md and translations.txt."""

import time

from omegaconf import DictConfig

from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.runs import check_output_dir, decode_overrides, load_for_inference, save_result
from qkvmt.studies.checks import whole_numbers


def lens_study(cfg: DictConfig) -> dict:
    start = time.time()
    whole_numbers({"n": cfg.n})  # before the slow load
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    sources, references, name = read_inputs(cfg, model.meta, model.paths[0])
    found = model.lens_study(sources, references, cfg.n, name, **decode_overrides(cfg.decode))
    found.result["wall_s"] = round(time.time() - start, 1)  # the whole command's, loading included
    final = save_result(cfg, model.paths, found, f"lens_{name}", "kv_study")
    print(found.summary() + f"; wrote {final}")
    return found.result | {"output_dir": str(final)}
