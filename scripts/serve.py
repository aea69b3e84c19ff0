"""Serve: qkvmt serve ckpt_path=<ckpt> [host=127.0.0.1] [port=8000]

The same as `qkvmt serve` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("serve")
