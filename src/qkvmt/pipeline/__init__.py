"""Importable entry points behind scripts/*.py: each takes a Hydra config and returns a dict."""

from qkvmt.pipeline.evaluate import evaluate
from qkvmt.pipeline.train import train
from qkvmt.pipeline.translate import average, translate

__all__ = ["average", "evaluate", "train", "translate"]
