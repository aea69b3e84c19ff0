"""qkvmt.json, what every export folder says about itself: its format, the language pair, the
run's decoding settings and the model configuration. translate.py engine=ctranslate2 and
`qkvmt.load` read it back, so a folder needs nothing from the checkpoint it came from."""

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from qkvmt.files import write_json
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig

METADATA = "qkvmt.json"
TOKENIZER = "tokenizer.json"  # the run's own tokenizer, beside a format's own files


@dataclass(frozen=True)
class ExportMetadata:
    format: str  # a name of qkvmt.export's FORMATS
    src_lang: str
    tgt_lang: str
    decode: dict  # the run's test decoding settings (DecodeConfig's fields)
    model_config: dict  # ModelConfig.to_dict()
    quantization: str | None = None  # the weights' type, where the format quantizes

    @classmethod
    def of(cls, fmt: str, config: ModelConfig, meta: CheckpointMeta, **extra) -> "ExportMetadata":
        return cls(fmt, meta.src_lang, meta.tgt_lang, meta.decode, config.to_dict(), **extra)

    def write(self, folder: Path) -> None:
        d = asdict(self)
        extra = {k: d.pop(k) for k in ("quantization",) if d[k] is not None}
        write_json(Path(folder) / METADATA, {"format": d.pop("format"), **extra, **d})

    @classmethod
    def read(cls, folder: Path) -> "ExportMetadata":
        d = json.loads((Path(folder) / METADATA).read_text(encoding="utf-8"))
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

    @property
    def max_positions(self) -> int:
        return self.model_config["max_positions"]
