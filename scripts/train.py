"""Train a model: python scripts/train.py [experiment=NAME] [overrides...]"""

import hydra

from qkvmt.errors import report_user_errors
from qkvmt.pipeline import train


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    train(cfg)


if __name__ == "__main__":
    main()
