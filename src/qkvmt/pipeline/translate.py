"""translate(cfg): stdin, or one sentence, to stdout."""

import itertools
import sys

from hydra.utils import instantiate
from omegaconf import DictConfig

from qkvmt.pipeline.inference import load_for_inference, required_text
from qkvmt.sources import decode_line
from qkvmt.translation import translate_lines


def translate(cfg: DictConfig, stdin=None, stdout=None) -> dict:
    """Translate `sentence`, or stdin line by line in chunks of `batch_lines`, keeping the order
    and keeping empty lines empty. Only translations go to stdout; each chunk is flushed.

    stdin is read as bytes and decoded line by line, so a line that is not UTF-8 stops the run
    with its line number (the chunks before it are already written)."""
    stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout
    sentence = None if cfg.sentence is None else required_text(cfg.sentence, "sentence")  # before the slow load
    model, tokenizer, _, fabric, _ = load_for_inference(cfg)
    decode_cfg = instantiate(cfg.decode)
    if sentence is not None:
        chunks = iter([[sentence]])
    else:
        lines = (text_line(line, n).rstrip("\r\n") for n, line in enumerate(stdin, 1))
        chunks = iter(lambda: list(itertools.islice(lines, cfg.batch_lines)), [])
    n = 0
    for chunk in chunks:
        with fabric.autocast():
            out = translate_lines(model, tokenizer, chunk, decode_cfg)
        stdout.write("".join(t + "\n" for t in out))
        stdout.flush()
        n += len(chunk)
    return {"sentences": n}


def text_line(line: bytes | str, number: int) -> str:
    """A line of sys.stdin.buffer decoded, or one of a text stream (as callers may pass) as it is."""
    return decode_line(line, "stdin", number) if isinstance(line, bytes) else line
