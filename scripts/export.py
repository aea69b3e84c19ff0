"""Export: qkvmt export ckpt_path=<ckpt> format=ctranslate2|huggingface [output_dir=<dir>]

The same as `qkvmt export` (qkvmt.cli.main): this script is its alias in the repository.
"""

from qkvmt.cli.main import run

if __name__ == "__main__":
    run("export")
