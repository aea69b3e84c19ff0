"""Cross-attention alignments:
python scripts/align.py ckpt_path=<ckpt> sentence='...' [reference='...'] | gold_dir=<dir>
"""

from qkvmt.cli import TEXT_KEYS, hydra_command
from qkvmt.pipeline.align import align

main = hydra_command(align, "align", __file__, text=TEXT_KEYS)

if __name__ == "__main__":
    main()
