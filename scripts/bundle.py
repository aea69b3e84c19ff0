"""Bundle: qkvmt bundle run_dir=<run> name=<name> commit=<sha> [dtype=float16]

The same as `qkvmt bundle` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("bundle")
