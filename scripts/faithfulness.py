"""Which signal describes what the model computed:
qkvmt faithfulness ckpt_path=<ckpt> [split=test_2016_flickr] [n=500]

The same as `qkvmt faithfulness` (qkvmt.commands): this script is its alias in the repository.
"""

from qkvmt.commands import run

if __name__ == "__main__":
    run("faithfulness")
