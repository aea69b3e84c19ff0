"""Bundle: python scripts/bundle.py run_dir=<run> name=<name> commit=<sha> [dtype=float16]"""

from qkvmt.cli import hydra_command
from qkvmt.pipeline.bundle import bundle

main = hydra_command(bundle, "bundle", __file__)

if __name__ == "__main__":
    main()
