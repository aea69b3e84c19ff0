"""format=safetensors: qkvmt's own model folder (qkvmt.model.weights_folder), which
`qkvmt.load(folder)` and every command's ckpt_path= open without pickle, optionally in half
precision (dtype=float16: half the size; check its BLEU with scripts/evaluate.py). A model opened
from a Hugging Face folder keeps that folder's tokenizer files in it, so it needs the folder no more."""

from dataclasses import replace
from pathlib import Path

from tokenizers import Tokenizer

from qkvmt.errors import UserError
from qkvmt.hf.tokenizer_files import as_text, files_of
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
        files = files_of(meta)  # a tokenizer that is a set of files: kept with the weights, as a checkpoint keeps it
        if files is not None:
            meta = replace(meta, tokenizer_files=as_text(files), hf_folder=None)
        write_weights_folder(model, tokenizer, meta, out, self.dtype)
