"""Evaluate a checkpoint: python scripts/evaluate.py ckpt_path=<ckpt> [split=...|src_file=... ref_file=...]"""

import hydra

from qkvmt.errors import report_user_errors
from qkvmt.pipeline import evaluate


@hydra.main(config_path="../conf", config_name="evaluate", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    evaluate(cfg)


if __name__ == "__main__":
    main()
