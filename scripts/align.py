"""Cross-attention alignments:
qkvmt align ckpt_path=<ckpt> sentence='...' [reference='...'] | src_file=<path> tgt_file=<path> | gold_dir=<dir>

The same as `qkvmt align` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("align")
