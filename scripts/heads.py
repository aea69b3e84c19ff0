"""Each head's effect on BLEU: qkvmt heads ckpt_path=<ckpt> [split=val] [gold_dir=<dir>]

The same as `qkvmt heads` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("heads")
