"""Docs figures: python scripts/figures.py [ckpt_path=<model>] [output_dir=<folder>]"""

from qkvmt.cli import TEXT_KEYS, hydra_command
from qkvmt.pipeline.figures import figures

main = hydra_command(figures, "figures", __file__, text=(*TEXT_KEYS, "explorer.sentence"))

if __name__ == "__main__":
    main()
