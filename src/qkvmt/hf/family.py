"""What qkvmt knows of one Hugging Face model family, a config.json's model_type: how its config maps to
qkvmt's ModelConfig, which files make its tokenizer and how they open, and how a model of ours is written
back as one. Each family's module (qkvmt.hf.marian, qkvmt.hf.m2m100) makes one; qkvmt.hf.families lists
them. The layer names are every family's alike (qkvmt.hf.names, BART's layout), the norm placement chooses
among them.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qkvmt.model.config import ModelConfig


@dataclass(frozen=True)
class Family:
    model_type: str  # config.json's
    title: str  # as messages name it
    # The defaults of transformers' config class for the keys qkvmt reads: an older config.json may leave out
    # what equals them.
    defaults: dict
    norm_first: bool  # pre-LN layers, each stack ending with a LayerNorm of its own
    sinusoidal_layout: str  # its position table (qkvmt.model.positions.SINUSOIDAL_LAYOUTS)
    output_bias: bool  # final_logits_bias
    # Whether the encoder and decoder share one vocabulary, given config.json's flags (`flag(key)`, typed)
    shares_vocabulary: Callable[[Callable[[str], bool]], bool]
    tokenizer_files: tuple[str, ...]  # the files its tokenizer needs
    other_files: tuple[str, ...]  # those it reads where the folder has them
    open_tokenizer: Callable[[Path, dict], object]  # (folder, tokenizer_config.json's contents) -> tokenizer
    # Written back (qkvmt.export.to_huggingface): the position tables a model written as this family may have
    # (the export renames the residual stream where the table is another layout of the same columns),
    # transformers' classes, and the config keys beyond the shape every family shares.
    layouts: tuple[str, ...]
    config_class: str
    model_class: str
    config_keys: Callable[[ModelConfig], dict]
    # Why a model of a config cannot be written as this family beyond its position table ("has ..."), or None
    refuses: Callable[[ModelConfig], str | None] = lambda c: None
