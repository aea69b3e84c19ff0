"""The results tables from the record of runs: qkvmt results [add=<run folder>] [check=true]

The same as `qkvmt results` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("results")
