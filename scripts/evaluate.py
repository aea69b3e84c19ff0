"""Evaluate a checkpoint: python scripts/evaluate.py ckpt_path=<ckpt> [split=...|src_file=... ref_file=...]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.evaluate import evaluate

main = hydra_command(evaluate, "evaluate", __file__)

if __name__ == "__main__":
    main()
