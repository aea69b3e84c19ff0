"""Q/K/V of one head: qkvmt inspect ckpt_path=<ckpt> sentence='...' kind=cross layer=L head=H

The same as `qkvmt inspect` (qkvmt.commands): this script is its alias in the repository.
"""

from qkvmt.commands import run

if __name__ == "__main__":
    run("inspect")
