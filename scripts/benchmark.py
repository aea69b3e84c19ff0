"""Benchmark against peers: python scripts/benchmark.py model=small device=cpu [output_dir=DIR]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline import benchmark

main = hydra_command(benchmark, "benchmark", __file__)

if __name__ == "__main__":
    main()
