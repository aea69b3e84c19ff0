"""The results tables from the record of runs: python scripts/results.py [add=<run folder>] [check=true]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.results import results

main = hydra_command(results, "results", __file__, text=("hardware", "conditions"))  # free text, spaces and all

if __name__ == "__main__":
    main()
