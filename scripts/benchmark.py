"""Benchmark against peers: qkvmt benchmark model=small device=cpu [output_dir=DIR]

The same as `qkvmt benchmark` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("benchmark")
