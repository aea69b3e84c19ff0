"""Train a model: python scripts/train.py [experiment=NAME] [overrides...]

Without experiment=, a machine with a GPU runs multi30k_de_en and one without runs the CPU
recipe, multi30k_de_en_cpu.
"""

import sys

import hydra
import torch

from qkvmt.cli import with_default_experiment
from qkvmt.errors import report_user_errors
from qkvmt.pipeline import train
from qkvmt.pipeline.train import optimized_value


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
@report_user_errors
def main(cfg) -> float | None:
    return optimized_value(train(cfg), cfg.optimized_metric)  # what Hydra's sweepers optimize


if __name__ == "__main__":
    sys.argv = with_default_experiment(sys.argv, torch.cuda.is_available())
    main()
