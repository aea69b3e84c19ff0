"""Each head's effect on BLEU: python scripts/heads.py ckpt_path=<ckpt> [split=val] [gold_dir=<dir>]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.heads import heads

main = hydra_command(heads, "heads", __file__)

if __name__ == "__main__":
    main()
