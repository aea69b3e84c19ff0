"""The attention explorer in a browser:
python scripts/explore.py ckpt_path=<ckpt> [reverse_ckpt_path=<ckpt>] [port=8000]
"""

from qkvmt.cli import TEXT_KEYS, hydra_command
from qkvmt.pipeline.explore import explore

main = hydra_command(explore, "explore", __file__, text=TEXT_KEYS)

if __name__ == "__main__":
    main()
