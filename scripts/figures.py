"""Docs figures: qkvmt figures [ckpt_path=<model>] [output_dir=<folder>]

The same as `qkvmt figures` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("figures")
