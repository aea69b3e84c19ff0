"""Train a model: python scripts/train.py [experiment=NAME] [overrides...]

Without experiment=, a machine with a GPU runs multi30k_de_en and one without runs the CPU
recipe, multi30k_de_en_cpu.
"""

import torch

from qkvmt.cli import hydra_command, with_default_experiment
from qkvmt.pipeline.train import train_command

main = hydra_command(train_command, "train", __file__, argv=lambda argv: with_default_experiment(argv, torch.cuda.is_available()))

if __name__ == "__main__":
    main()
