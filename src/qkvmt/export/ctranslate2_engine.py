"""Translation with an exported CTranslate2 model folder (qkvmt.export.to_ctranslate2).

Text becomes subwords with the run's own tokenizer and `qkvmt.text.tokenizer.encode`, exactly as for
our decoder, and the search settings are translated to CTranslate2's:

    ours (DecodeConfig)                        CTranslate2 translate_batch
    beam_size, len_penalty (fairseq style)     beam_size, length_penalty: score / length^alpha
    limit = a·(source + </s>) + b, EOS incl.   max_decoding_length = limit - 1, per sentence
    cut_at_limit (no </s> at the limit)        max_decoding_length = limit
    min_len (EOS included)                     min_decoding_length = min_len - 1
    <pad> and <s> never generated              suppress_sequences (ModelConfig.banned_ids)
    forced_first_id (a target language)        target_prefix

Sentences are grouped by their length limit, so each gets exactly our limit. One difference
stays: at the limit our search forces </s> and counts its probability, CTranslate2 just stops,
so a beam that reaches the limit may rank differently (README, "Deploying"); and CTranslate2 stops
a sentence at beam_size finished hypotheses, as decode.early_stopping=true does (false is refused). A
many-to-many model's target language is forced first, as `qkvmt.api.Model` forces it. A Hugging Face
model's folder (qkvmt.hf) brings its own tokenizer files, which `load_tokenizer` reads.
"""

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from qkvmt.decoding.lines import encode_sources
from qkvmt.decoding.search import DecodeConfig
from qkvmt.decoding.stepper import max_lengths
from qkvmt.errors import UserError
from qkvmt.export.metadata import METADATA, TOKENIZER, ExportMetadata
from qkvmt.export.to_ctranslate2 import require_ctranslate2, vocabulary
from qkvmt.model.config import ModelConfig
from qkvmt.results.translations import Translations
from qkvmt.text.tokenizer import decode, target_side

FILES = ("model.bin", METADATA)  # and a tokenizer: tokenizer.json, or a Hugging Face model's files


@dataclass
class CTranslate2Model:
    """An exported folder, as `qkvmt.load` returns it: it translates (with our text handling and
    search settings); attention, alignment and inspection need the checkpoint itself."""

    translator: object  # ctranslate2.Translator
    tokenizer: Tokenizer
    meta: ExportMetadata  # qkvmt.json: languages, the run's decoding settings, the model config

    def decoding(self, settings: DecodeConfig | None = None, **decode) -> DecodeConfig:
        """As `qkvmt.api.Model.decoding`: `settings` (default: the run's own) with the fields given as
        keywords taking precedence, a many-to-many model's target language forced unless they force another."""
        return DecodeConfig.of_model(self.meta.decode, settings, decode)

    def translate(self, sentences, settings: DecodeConfig | None = None, **decode) -> Translations:
        """As `qkvmt.api.Model.translate`: `settings` (default: the run's own) with any
        DecodeConfig field given as a keyword overriding it."""
        lines = [sentences] if isinstance(sentences, str) else list(sentences)
        cfg = self.decoding(settings, **decode)
        return Translations(translate_lines_ctranslate2(self, lines, cfg), lines, settings=asdict(cfg))

    def _checkpoint_only(self, *args, **kwargs):
        raise UserError(
            "an exported CTranslate2 folder only translates: load the checkpoint it was exported from "
            "(qkvmt.load(<file.ckpt>)) to see attention, align or inspect"
        )

    attention = align = inspect = _checkpoint_only


def is_ctranslate2_folder(folder: Path) -> bool:
    return all((Path(folder) / n).is_file() for n in FILES)


def folder_tokenizer(folder: Path):
    """The tokenizer an export folder holds: a Hugging Face model's own files (Marian's SentencePiece
    pair, a tokenizer_config.json beside them), else qkvmt's tokenizer.json."""
    if (folder / "tokenizer_config.json").is_file():
        from qkvmt.hf.tokenizers import load_tokenizer

        return load_tokenizer(folder)
    if not (folder / TOKENIZER).is_file():
        raise UserError(
            f"model_dir={folder} has no {TOKENIZER}: give a folder written by qkvmt export format=ctranslate2"
        )
    return Tokenizer.from_file(str(folder / TOKENIZER))


def load_ctranslate2(
    model_dir, device: str = "cpu", compute_type: str = "default", threads: int = 0
) -> CTranslate2Model:
    """A folder written by `qkvmt export format=ctranslate2`."""
    ct2 = require_ctranslate2()
    folder = Path(model_dir) if model_dir else None
    if folder is None:
        raise UserError("engine=ctranslate2 needs model_dir=<folder written by qkvmt export format=ctranslate2>")
    missing = [n for n in FILES if not (folder / n).is_file()]
    if not folder.is_dir() or missing:
        what = "is not a folder" if not folder.is_dir() else f"has no {', '.join(missing)}"
        raise UserError(f"model_dir={folder} {what}: give a folder written by qkvmt export format=ctranslate2")
    try:
        translator = ct2.Translator(str(folder), device=device, compute_type=compute_type, intra_threads=threads)
    except (RuntimeError, ValueError) as e:
        raise UserError(f"model_dir={folder}: CTranslate2 cannot load it ({str(e).splitlines()[0]})") from None
    return CTranslate2Model(translator, folder_tokenizer(folder), ExportMetadata.read(folder))


def search_options(cfg: DecodeConfig, model: ModelConfig, target) -> dict:
    """CTranslate2's translate_batch options for our decoding settings (the length limit aside);
    `target`: the target side's tokenizer, which names the tokens."""
    if not cfg.early_stopping and cfg.beam_size > 1:
        raise UserError(
            "decode.early_stopping=false: CTranslate2 stops a sentence at beam_size finished hypotheses, as "
            "decode.early_stopping=true does; give decode.early_stopping=true, or translate with engine=qkvmt"
        )
    if cfg.compute_type != "float32":  # CTranslate2 computes in the type the folder was loaded with
        raise UserError(
            f"decode.compute_type={cfg.compute_type} is for engine=qkvmt; engine=ctranslate2 computes in "
            "compute_type= (the type the folder was exported with, or int8, bfloat16, ...): "
            f"give compute_type={cfg.compute_type}"
        )
    if cfg.renormalize:  # generate's way after the bans, not CTranslate2's
        raise UserError(
            "decode.renormalize=true (a Hugging Face folder's generation settings) is not a setting CTranslate2 "
            "has; give decode.renormalize=false, or translate with engine=qkvmt"
        )
    if cfg.len_penalty_style != "fairseq" and cfg.len_penalty != 0:
        raise UserError(
            f"decode.len_penalty_style={cfg.len_penalty_style}: CTranslate2 normalises by length^alpha only; "
            "use decode.len_penalty_style=fairseq (or decode.len_penalty=0)"
        )
    return {
        "beam_size": cfg.beam_size,
        "length_penalty": cfg.len_penalty,
        "min_decoding_length": cfg.min_len - 1,
        "suppress_sequences": [[target.id_to_token(i)] for i in model.banned_ids],
        "max_input_length": 0,  # sources are cut to the model's positions here, as ours are
        "max_batch_size": cfg.max_tokens,
        "batch_type": "tokens",
    }


def translate_lines_ctranslate2(engine: CTranslate2Model, lines: list[str], cfg: DecodeConfig) -> list[str]:
    """Detokenized translations of `lines`, in order; an empty line stays empty."""
    tok = engine.tokenizer
    ids = encode_sources(tok, lines, engine.meta.max_positions)  # warns of sentences cut to fit
    src = [[tok.id_to_token(i) for i in x[: engine.meta.max_positions - 1]] for x in ids]
    limits = max_lengths(torch.tensor([len(x) + 1 for x in src]), cfg, engine.meta.max_positions).numpy()
    target = target_side(tok)
    model = ModelConfig.from_dict(engine.meta.model_config)
    options = search_options(cfg, model, target)
    # the ids of the target vocabulary the export registered, rows the tokenizer does not name included
    target_ids = {token: i for i, token in enumerate(vocabulary(target, model.target_vocab_size))}
    if cfg.forced_first_id is not None:  # a many-to-many model's target language comes first
        options["target_prefix"] = [[target.id_to_token(cfg.forced_first_id)]] * len(lines)
    out: list[list[int]] = [[] for _ in lines]
    for limit in np.unique(limits):
        rows = [i for i in np.flatnonzero(limits == limit) if src[i]]
        if not rows:
            continue
        prefix = {"target_prefix": options["target_prefix"][: len(rows)]} if "target_prefix" in options else {}
        results = engine.translator.translate_batch(
            [src[i] for i in rows], max_decoding_length=int(limit) - 1 + cfg.cut_at_limit, **(options | prefix)
        )
        for i, r in zip(rows, results):
            out[i] = [target_ids[t] for t in r.hypotheses[0]]
    return decode(tok, out)
