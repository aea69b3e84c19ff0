"""translate(cfg): stdin or one sentence to stdout. average(cfg): write an averaged checkpoint."""

import itertools
import sys
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.checkpoint import average_checkpoints, resolve_average
from qkvmt.errors import UserError
from qkvmt.files import atomic_write
from qkvmt.pipeline.evaluate import load_for_inference
from qkvmt.translation import translate_lines


def translate(cfg: DictConfig, stdin=None, stdout=None) -> dict:
    """Translate `sentence`, or stdin line by line in chunks of `batch_lines`, keeping the order
    and keeping empty lines empty. Only translations go to stdout; each chunk is flushed."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    model, tokenizer, _, fabric, _ = load_for_inference(cfg)
    decode_cfg = instantiate(cfg.decode)
    if cfg.sentence is not None:
        if not str(cfg.sentence).strip():
            raise UserError('sentence is empty: give the text to translate, e.g. sentence="Ein Hund läuft."')
        chunks = iter([[str(cfg.sentence)]])
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


def average(cfg: DictConfig) -> dict:
    """Average `average` (lastN or a list) and save a checkpoint that evaluates like any other."""
    paths = resolve_average(cfg.ckpt_path, OmegaConf.to_object(cfg.average) if OmegaConf.is_list(cfg.average) else cfg.average)
    if len(paths) < 2:
        raise UserError("averaging needs at least two checkpoints: average=last5, or a list of paths")
    output = Path(cfg.output) if cfg.output else paths[-1].parent / f"averaged_{len(paths)}.ckpt"
    ckpt = average_checkpoints(paths)
    atomic_write(output, lambda f: torch.save(ckpt, f))
    print(f"averaged {len(paths)} checkpoints into {output}")
    return {"output": str(output), "averaged_from": [str(p) for p in paths]}
