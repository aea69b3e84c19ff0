"""Importable entry points behind scripts/*.py: each takes a Hydra config and returns a dict."""

from qkvmt.pipeline.align import align
from qkvmt.pipeline.average import average
from qkvmt.pipeline.benchmark import benchmark
from qkvmt.pipeline.evaluate import evaluate
from qkvmt.pipeline.explore import explore
from qkvmt.pipeline.export import export
from qkvmt.pipeline.heads import heads
from qkvmt.pipeline.inspect_attention import inspect_attention
from qkvmt.pipeline.train import train
from qkvmt.pipeline.translate import translate

__all__ = ["align", "average", "benchmark", "evaluate", "explore", "export", "heads", "inspect_attention", "train", "translate"]
