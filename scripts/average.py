"""Average checkpoints: python scripts/average.py ckpt_path=<ckpt> average=last5 [output=<file>]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.average import average

main = hydra_command(average, "average", __file__)

if __name__ == "__main__":
    main()
