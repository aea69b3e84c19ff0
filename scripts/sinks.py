"""Where cross-attention's mass goes: qkvmt sinks ckpt_path=<ckpt> [split=test] [n=1000]

The same as `qkvmt sinks` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("sinks")
