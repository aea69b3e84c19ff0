"""The Hugging Face model families qkvmt opens and writes, by config.json's model_type: one module each
(its qkvmt.hf.family.Family) and one row here. The config, the tokenizer and the export of a folder all
take their family from this table.
"""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.family import Family
from qkvmt.hf.json_files import shown
from qkvmt.hf.m2m100 import M2M100
from qkvmt.hf.marian import MARIAN
from qkvmt.model.config import ModelConfig

FAMILIES: dict[str, Family] = {family.model_type: family for family in (MARIAN, M2M100)}


def family_named(model_type) -> Family | None:
    """The family of config.json's model_type, whatever value the file gives; None for none of ours."""
    return FAMILIES.get(model_type) if isinstance(model_type, str) else None


def family_of(model_type, where: Path) -> Family:
    """The family of config.json's model_type (from the file `where`, which the error names)."""
    family = family_named(model_type)
    if family is None:
        raise UserError(
            f"{where}: model_type={shown(model_type)} cannot be imported; qkvmt opens {', '.join(FAMILIES)}"
        )
    return family


def written_as(cfg: ModelConfig) -> Family:
    """The family a model of `cfg` is written as: the first with its norm placement."""
    return next(family for family in FAMILIES.values() if family.norm_first == cfg.norm_first)
