"""Q/K/V of one head: qkvmt inspect ckpt_path=<ckpt> sentence='...' kind=cross layer=L head=H

The same as `qkvmt inspect` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("inspect")
