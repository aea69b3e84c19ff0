"""Train a model: python scripts/train.py [experiment=NAME] [overrides...]

Without experiment=, a machine with a GPU runs multi30k_de_en and one without runs the CPU
recipe, multi30k_de_en_cpu.
"""

import torch

from qkvmt.training.torch_build import skip_idle_triton

skip_idle_triton()  # before Lightning imports torch._dynamo, which imports triton: 78 MB a process without a GPU

from qkvmt.cli import hydra_command, with_default_experiment  # noqa: E402
from qkvmt.pipeline.train import train_command  # noqa: E402

main = hydra_command(
    train_command, "train", __file__, argv=lambda argv: with_default_experiment(argv, torch.cuda.is_available())
)

if __name__ == "__main__":
    main()
