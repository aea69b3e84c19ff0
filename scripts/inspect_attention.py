"""Q/K/V of one head: python scripts/inspect_attention.py ckpt_path=<ckpt> sentence='...' kind=cross layer=L head=H"""

from qkvmt.cli import TEXT_KEYS, hydra_command
from qkvmt.pipeline.inspect_attention import inspect_attention

main = hydra_command(inspect_attention, "inspect_attention", __file__, text=TEXT_KEYS)

if __name__ == "__main__":
    main()
