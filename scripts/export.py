"""Export: python scripts/export.py ckpt_path=<ckpt> format=ctranslate2|huggingface [output_dir=<dir>]"""

import hydra

from qkvmt.errors import report_user_errors
from qkvmt.pipeline import export


@hydra.main(config_path="../conf", config_name="export", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    export(cfg)


if __name__ == "__main__":
    main()
