"""Average checkpoints: qkvmt average ckpt_path=<ckpt> average=last5 [output=<file>]

The same as `qkvmt average` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("average")
