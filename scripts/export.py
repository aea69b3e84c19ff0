"""Export: python scripts/export.py ckpt_path=<ckpt> format=ctranslate2|huggingface [output_dir=<dir>]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.export import export

main = hydra_command(export, "export", __file__)

if __name__ == "__main__":
    main()
