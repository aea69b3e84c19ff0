"""Average checkpoints: python scripts/average.py ckpt_path=<ckpt> average=last5 [output=<file>]"""

import hydra

from qkvmt.errors import report_user_errors
from qkvmt.pipeline import average


@hydra.main(config_path="../conf", config_name="average", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    average(cfg)


if __name__ == "__main__":
    main()
