"""The formats scripts/export.py writes, by name (`format=NAME`).

A format is a class made from the command's config (it checks its package and options then,
before the checkpoint is loaded), with `check(model)`, which refuses in one line what the format
cannot hold, and `write(model, tokenizer, meta, out)`, which fills an empty folder and writes
qkvmt.json (qkvmt.export.metadata; safetensors: qkvmt.model.weights_folder). A new format is
such a class in its own module, and one entry here.
"""

from qkvmt.errors import UserError
from qkvmt.export.to_ctranslate2 import CTranslate2Format
from qkvmt.export.to_huggingface import HuggingFaceFormat
from qkvmt.export.to_safetensors import SafetensorsFormat

FORMATS = {"ctranslate2": CTranslate2Format, "huggingface": HuggingFaceFormat, "safetensors": SafetensorsFormat}


# Each format's own option, with the value the command's config gives it: set for another format, it
# could not take effect, so it is refused rather than ignored.
OPTIONS = {"quantization": ("ctranslate2", "float32"), "dtype": ("safetensors", "float32")}


def export_format(cfg):
    """The format `cfg.format` names, made from `cfg`; an unknown name, or another format's option, is a
    UserError."""
    if cfg.format not in FORMATS:
        raise UserError(f"format={cfg.format!r}: use {' or '.join(f'format={name}' for name in FORMATS)}")
    for key, (owner, default) in OPTIONS.items():
        if cfg.format != owner and cfg.get(key, default) != default:
            raise UserError(
                f"{key}={cfg[key]} is for format={owner}; format={cfg.format} cannot take it: leave {key} out, "
                f"or give format={owner}"
            )
    return FORMATS[cfg.format](cfg)
