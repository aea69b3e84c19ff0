"""Causal tracing over pairs of sources: qkvmt patch ckpt_path=<ckpt> clean_file=<path> corrupt_file=<path>

The same as `qkvmt patch` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("patch")
