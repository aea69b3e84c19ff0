"""translate(cfg): stdin, or one sentence, to stdout."""

import itertools
import sys

import torch
from omegaconf import DictConfig

from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.export.ctranslate2_engine import CTranslate2Model, load_ctranslate2
from qkvmt.host.process_memory import keep_freed_host_memory
from qkvmt.pipeline.inference_setup import decode_overrides, load_for_inference
from qkvmt.setting_types import whole_number
from qkvmt.text.sources import decode_line, required_text
from qkvmt.text.visible import visible_text


def translate(cfg: DictConfig, stdin=None, stdout=None) -> dict:
    """Translate `sentence`, or stdin line by line in chunks of `batch_lines`, keeping the order
    and keeping empty lines (and lines with no visible character) empty. Only translations go to
    stdout; each chunk is flushed.

    stdin is read as bytes and decoded line by line, so a line that is not UTF-8 stops the run
    with its line number (the chunks before it are already written)."""
    stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout
    sentence = None if cfg.sentence is None else required_text(cfg.sentence, "sentence")  # before the slow load
    whole_number("batch_lines", cfg.batch_lines)  # 0 would end stdin's first chunk empty, translating nothing
    given = decode_overrides(cfg.decode)
    keep_freed_host_memory()  # chunk after chunk allocates the same large buffers: reuse them, not fresh pages
    engine = translator(cfg)
    settings = engine.decoding(**given)
    if sentence is not None:
        chunks = iter([[sentence]])
    else:
        lines = (text_line(line, n) for n, line in enumerate(stdin, 1))
        chunks = iter(lambda: list(itertools.islice(lines, cfg.batch_lines)), [])
    n = 0
    for chunk in chunks:
        out = engine.translate(chunk, settings)
        stdout.write("".join(t + "\n" for t in out))
        stdout.flush()
        n += len(chunk)
    return {"sentences": n}


def translator(cfg: DictConfig) -> Model | CTranslate2Model:
    """The chosen engine: our model from ckpt_path, or an exported CTranslate2 folder from model_dir;
    each decodes by its own settings (`decoding`) and translates (`translate(lines, settings)`)."""
    if cfg.engine == "ctranslate2":
        if cfg.ckpt_path or cfg.average:
            raise UserError(
                "engine=ctranslate2 reads model_dir=, not ckpt_path= or average=: "
                "export the checkpoint first (qkvmt export)"
            )
        if str(cfg.fabric.precision) != "32-true":  # CTranslate2 computes in compute_type
            raise UserError(
                f"fabric.precision={cfg.fabric.precision} is for engine=qkvmt; engine=ctranslate2 computes in "
                "compute_type= (int8, float16, ...)"
            )
        return load_ctranslate2(cfg.model_dir, compute_type=cfg.compute_type, threads=torch.get_num_threads())
    if cfg.engine != "qkvmt":
        raise UserError(f"engine={cfg.engine!r}: use engine=qkvmt (ckpt_path=) or engine=ctranslate2 (model_dir=)")
    if cfg.model_dir:
        raise UserError("model_dir= is for engine=ctranslate2; engine=qkvmt reads ckpt_path=")
    if cfg.compute_type != "default":  # our engine computes in fabric.precision
        raise UserError(
            f"compute_type={cfg.compute_type} is for engine=ctranslate2; engine=qkvmt computes in "
            "fabric.precision= (32-true, bf16-mixed, ...), its searches in decode.compute_type= "
            "(float32, bfloat16, int8)"
        )
    return load_for_inference(cfg)


def text_line(line: bytes | str, number: int) -> str:
    """The visible text of a line of sys.stdin.buffer, decoded, or of one of a text stream (as callers may pass)."""
    return visible_text(decode_line(line, "stdin", number) if isinstance(line, bytes) else line)
