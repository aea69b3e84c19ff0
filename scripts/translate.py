"""Translate: python scripts/translate.py ckpt_path=<ckpt> < in.txt > out.txt, or sentence='...'"""

from qkvmt.cli import TEXT_KEYS, hydra_command
from qkvmt.pipeline.translate import translate

main = hydra_command(translate, "translate", __file__, text=TEXT_KEYS)

if __name__ == "__main__":
    main()
