"""Benchmark against peers: python scripts/benchmark.py model=small device=cpu [output_dir=DIR]"""

import hydra

from qkvmt.errors import report_user_errors
from qkvmt.pipeline import benchmark


@hydra.main(config_path="../conf", config_name="benchmark", version_base="1.3")
@report_user_errors
def main(cfg) -> None:
    benchmark(cfg)


if __name__ == "__main__":
    main()
