"""average(cfg): write the average of several checkpoints as one checkpoint."""

from pathlib import Path

import torch
from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.files import atomic_write, check_new_output
from qkvmt.loading import average_checkpoints
from qkvmt.pipeline.inference_setup import checkpoint_paths
from qkvmt.setting_types import path_text


def average(cfg: DictConfig) -> dict:
    """Average `average` (lastN or a list) and save a checkpoint that evaluates like any other."""
    given = path_text(cfg.output)
    if given:
        check_new_output(Path(given), "output", folder=False)
    paths = checkpoint_paths(cfg)
    if len(paths) < 2:
        raise UserError("averaging needs at least two checkpoints: average=last5, or a list of paths")
    output = Path(given) if given else paths[-1].parent / f"averaged_{len(paths)}.ckpt"
    ckpt = average_checkpoints(paths)
    atomic_write(output, lambda f: torch.save(ckpt, f))
    print(f"averaged {len(paths)} checkpoints into {output}")
    return {"output": str(output), "averaged_from": [str(p) for p in paths]}
