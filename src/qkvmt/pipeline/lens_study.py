"""lens_study(cfg): what each encoder layer already knows, on a split (`qkvmt intervene
study=lens`, Model.lens_study): each encoder depth's translations scored against the references
and against the model's own, written as study.json, study.md and translations.txt."""

from omegaconf import DictConfig

from qkvmt.pipeline.inference_setup import decode_overrides
from qkvmt.pipeline.split_study import split_study
from qkvmt.studies.checks import whole_numbers


def lens_study(cfg: DictConfig) -> dict:
    whole_numbers({"n": cfg.n})  # before the slow load
    decode = decode_overrides(cfg.decode)
    return split_study(
        cfg, lambda model, src, refs, name: model.lens_study(src, refs, cfg.n, name, **decode), "kv_study", "lens_"
    )
