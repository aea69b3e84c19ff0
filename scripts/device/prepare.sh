#!/usr/bin/env bash
# For a GPU machine without network access: run this on a machine with it. It fills the
# checkout's git-ignored .whl/ with wheels of the dependencies such a machine usually lacks, and
# .device-data/ with a writable copy of Multi30k (about 30 MB together); copy the checkout with
# both to the GPU machine, where scripts/device/measure.sh uses them. The GPU machine needs
# Linux x86-64 and Python (PYTHON_VERSION, default 3.12) with torch, transformers and tokenizers
# and what they bring (numpy, tqdm, safetensors). The wheels are the rest the GPU stages import,
# at the versions it is tested with, hydra-core, omegaconf, antlr4 and sacremoses among them.
# Usage: bash scripts/device/prepare.sh /path/to/multi30k
set -euo pipefail
src=${1:?give the Multi30k folder (the one with train.de.gz and tok/)}
[ -d "$src/tok" ] || { echo "prepare.sh: $src has no tok/: the GPU stages score against its tokenized references" >&2; exit 2; }
multi30k=$(realpath "$src")
python=${PYTHON_VERSION:-3.12}
cd "$(dirname "$0")/../.."
rm -rf .whl .device-data
mkdir -p .whl .device-data
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  lightning==2.6.6 lightning-utilities hydra-core==1.3.2 omegaconf==2.3.0 sacrebleu==2.6.0 portalocker tabulate \
  colorama lxml sacremoses==0.2.0 click joblib regex matplotlib contourpy cycler fonttools kiwisolver pyparsing
# hydra's parser runtime is published as a source archive only; it is pure Python
python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
cp -r --no-preserve=mode "$multi30k" .device-data/multi30k  # writable, so a rerun can remove it
du -sh .whl .device-data
