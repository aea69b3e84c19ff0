"""translate(cfg): stdin, or one sentence, to stdout."""

import itertools
import sys

from hydra.utils import instantiate
from omegaconf import DictConfig

from qkvmt.pipeline.inference import load_for_inference, required_text
from qkvmt.translation import translate_lines


def translate(cfg: DictConfig, stdin=None, stdout=None) -> dict:
    """Translate `sentence`, or stdin line by line in chunks of `batch_lines`, keeping the order
    and keeping empty lines empty. Only translations go to stdout; each chunk is flushed."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    model, tokenizer, _, fabric, _ = load_for_inference(cfg)
    decode_cfg = instantiate(cfg.decode)
    if cfg.sentence is not None:
        chunks = iter([[required_text(cfg.sentence, "sentence")]])
    else:
        lines = (line.rstrip("\r\n") for line in stdin)
        chunks = iter(lambda: list(itertools.islice(lines, cfg.batch_lines)), [])
    n = 0
    for chunk in chunks:
        with fabric.autocast():
            out = translate_lines(model, tokenizer, chunk, decode_cfg)
        stdout.write("".join(t + "\n" for t in out))
        stdout.flush()
        n += len(chunk)
    return {"sentences": n}
