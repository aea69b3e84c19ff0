#!/usr/bin/env bash
# Run here, on a machine with package registries, before a GPU session (issue 14): fills the
# git-ignored .whl/ with the wheels the GPU machine lacks, and .device-data/ with the data.
# That machine has Python 3.12 with torch, lightning, transformers, tokenizers, sacrebleu and
# matplotlib (KINDS.md of the device tool), and no network: hydra-core, omegaconf, antlr4 and
# sacremoses are missing; the others come along at the versions we test with. Both folders
# travel with `carry: [".whl", ".device-data"]` (about 30 MB together).
# Usage: bash scripts/device/prepare.sh /path/to/multi30k
set -euo pipefail
multi30k=$(realpath "${1:?give the Multi30k folder (the one with train.de.gz and tok/)}")
cd "$(dirname "$0")/../.."
rm -rf .whl .device-data
mkdir -p .whl .device-data
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  lightning==2.6.6 lightning-utilities hydra-core==1.3.2 omegaconf==2.3.0 sacrebleu==2.6.0 portalocker tabulate \
  colorama lxml sacremoses==0.2.0 click joblib regex matplotlib contourpy cycler fonttools kiwisolver pyparsing
# hydra's parser runtime is published as a source archive only; it is pure Python
python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
cp -r --no-preserve=mode "$multi30k" .device-data/multi30k  # writable, so a rerun can remove it
du -sh .whl .device-data
