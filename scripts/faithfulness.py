"""Which signal describes what the model computed:
python scripts/faithfulness.py ckpt_path=<ckpt> [split=test_2016_flickr] [n=500]
"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.faithfulness import faithfulness

main = hydra_command(faithfulness, "faithfulness", __file__)

if __name__ == "__main__":
    main()
