"""Cross-attention alignments: python scripts/align.py ckpt_path=<ckpt> sentence='...' [reference='...'] | gold_dir=<dir>"""

import sys

import hydra

from qkvmt.cli import quote_text_overrides
from qkvmt.errors import report_user_errors
from qkvmt.pipeline import align


@hydra.main(config_path="../conf", config_name="align", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    align(cfg)


if __name__ == "__main__":
    sys.argv = quote_text_overrides(sys.argv)
    main()
