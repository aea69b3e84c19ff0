"""Translate: qkvmt translate ckpt_path=<ckpt> < in.txt > out.txt, or sentence='...'

The same as `qkvmt translate` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("translate")
