"""What the commands of a study over a split's sources and references share (qkvmt sinks, qkvmt
intervene study=lens): the model loaded, the inputs read, one Model method run on them, its result
saved whole in the output folder and its summary printed; the result's dict returned."""

import time
from collections.abc import Callable

from omegaconf import DictConfig

from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.inference_setup import check_output_dir, load_for_inference, save_result


def split_study(cfg: DictConfig, study: Callable, kind: str, prefix: str = "") -> dict:
    """`study(model, sources, references, name)`, a Model method's call returning a result with a
    `result` dict, saved in output_dir or <run>/<kind>/<prefix><name>_<time>."""
    start = time.time()
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    sources, references, name = read_inputs(cfg, model.meta, model.paths[0])
    found = study(model, sources, references, name)
    found.result["wall_s"] = round(time.time() - start, 1)  # the whole command's, loading included
    final = save_result(cfg, model.paths, found, prefix + name, kind)
    print(found.summary() + f"; wrote {final}")
    return found.result | {"output_dir": str(final)}
