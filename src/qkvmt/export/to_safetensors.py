"""format=safetensors: qkvmt's own model folder (qkvmt.model.weights_folder), which
`qkvmt.load(folder)` and every command's ckpt_path= open without pickle, optionally in half
precision (dtype=float16: half the size; check its BLEU with scripts/evaluate.py)."""

from pathlib import Path

from tokenizers import Tokenizer

from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.transformer import Transformer
from qkvmt.model.weights_folder import DTYPES, write_weights_folder


class SafetensorsFormat:
    def __init__(self, cfg):
        if cfg.dtype not in DTYPES:
            raise UserError(f"dtype={cfg.dtype!r}: use one of {', '.join(f'dtype={d}' for d in DTYPES)}")
        self.dtype = cfg.dtype

    def check(self, model: Transformer) -> None:
        """Nothing to refuse: the folder holds any model qkvmt trains."""

    def write(self, model: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, out: Path) -> None:
        write_weights_folder(model, tokenizer, meta, out, self.dtype)
