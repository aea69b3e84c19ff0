"""Train a model: qkvmt train [experiment=NAME] [overrides...]

Without experiment=, a machine with a GPU runs multi30k_de_en and one without runs the CPU
recipe, multi30k_de_en_cpu.

The same as `qkvmt train` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("train")
