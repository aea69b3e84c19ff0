"""What the studies read of a model: qkvmt.Model's parts, typed here so that nothing below
qkvmt.api imports it."""

from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer

from qkvmt.alignment.policy import AlignmentPolicy
from qkvmt.bundled import bundled_name
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.transformer import Transformer


class ModelLike(Protocol):
    transformer: Transformer
    tokenizer: Tokenizer
    meta: CheckpointMeta
    paths: list[Path]
    fabric: object  # a Lightning Fabric or qkvmt.host.placement's CPUPlacement: its device and autocast

    @property
    def default_policy(self) -> AlignmentPolicy: ...

    def policy(self, policy: AlignmentPolicy | dict | None = None) -> AlignmentPolicy: ...

    def decoding(self, settings: DecodeConfig | None = None, **decode) -> DecodeConfig: ...

    def translate(self, sentences, settings: DecodeConfig | None = None, progress: bool = False, **decode): ...

    def forced(self, source: str, target: str | None, **decode) -> str | list[int]: ...


def identity(model: ModelLike) -> dict:
    """How a study's result names its model (a bundled one by name, else by its first checkpoint)
    and its checkpoints."""
    return {
        "model": bundled_name(model.paths[0]) or str(model.paths[0]),
        "checkpoints": [str(p) for p in model.paths],
    }
