"""Translate: python scripts/translate.py ckpt_path=<ckpt> < in.txt > out.txt, or sentence='...'"""

import sys

import hydra

from qkvmt.cli import quote_text_overrides
from qkvmt.errors import report_user_errors
from qkvmt.pipeline import translate


@hydra.main(config_path="../conf", config_name="translate", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    translate(cfg)


if __name__ == "__main__":
    sys.argv = quote_text_overrides(sys.argv)
    main()
