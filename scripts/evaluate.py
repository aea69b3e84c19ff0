"""Evaluate a checkpoint: qkvmt evaluate ckpt_path=<ckpt> [split=...|src_file=... ref_file=...]

The same as `qkvmt evaluate` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("evaluate")
