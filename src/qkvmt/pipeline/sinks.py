"""sinks(cfg): where cross-attention's mass goes on a split (Model.sinks): each layer's and head's
share of weight on </s> and on punctuation, forced on the references and over the model's own
translations, written as sinks.json, sinks.md and sinks.png."""

from omegaconf import DictConfig

from qkvmt.pipeline.inference_setup import decode_overrides
from qkvmt.pipeline.split_study import split_study
from qkvmt.studies.checks import whole_numbers


def sinks(cfg: DictConfig) -> dict:
    whole_numbers({"n": cfg.n})  # before the slow load
    decode = decode_overrides(cfg.decode)
    return split_study(cfg, lambda model, src, refs, name: model.sinks(src, refs, cfg.n, name, **decode), "sinks")
