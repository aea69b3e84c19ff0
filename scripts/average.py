"""Average checkpoints: qkvmt average ckpt_path=<ckpt> average=last5 [output=<file>]

The same as `qkvmt average` (qkvmt.commands): this script is its alias in the repository.
"""

from qkvmt.commands import run

if __name__ == "__main__":
    run("average")
