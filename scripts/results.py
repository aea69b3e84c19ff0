"""The results tables from the record of runs: qkvmt results [add=<run folder>] [check=true]

The same as `qkvmt results` (qkvmt.commands): this script is its alias in the repository.
"""

from qkvmt.commands import run

if __name__ == "__main__":
    run("results")
