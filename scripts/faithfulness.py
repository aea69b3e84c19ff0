"""Which signal describes what the model computed:
qkvmt faithfulness ckpt_path=<ckpt> [split=test_2016_flickr] [n=500]

The same as `qkvmt faithfulness` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("faithfulness")
