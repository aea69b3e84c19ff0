"""The attention explorer in a browser:
qkvmt explore ckpt_path=<ckpt> [reverse_ckpt_path=<ckpt>] [port=8000]

The same as `qkvmt explore` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("explore")
