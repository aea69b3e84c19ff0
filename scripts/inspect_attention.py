"""Q/K/V of one head: python scripts/inspect_attention.py ckpt_path=<ckpt> sentence='...' kind=cross layer=L head=H"""

import sys

import hydra

from qkvmt.cli import quote_text_overrides
from qkvmt.errors import report_user_errors
from qkvmt.pipeline import inspect


@hydra.main(config_path="../conf", config_name="inspect_attention", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    inspect(cfg)


if __name__ == "__main__":
    sys.argv = quote_text_overrides(sys.argv)
    main()
