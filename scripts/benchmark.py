"""Benchmark against peers: python scripts/benchmark.py model=small device=cpu [output_dir=DIR]"""

from qkvmt.training.torch_build import skip_idle_triton

skip_idle_triton()  # as scripts/train.py: with no GPU to run triton, torch.compile treats it as absent

from qkvmt.cli import hydra_command  # noqa: E402
from qkvmt.pipeline.benchmark import benchmark  # noqa: E402

main = hydra_command(benchmark, "benchmark", __file__)

if __name__ == "__main__":
    main()
