"""Edits of attention: qkvmt intervene ckpt_path=<ckpt> sentence='...' 'edits=[{swap: {a: 1, b: 6, what: keys}}]'

The same as `qkvmt intervene` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("intervene")
