#!/usr/bin/env bash
# The GPU figures of qkvmt, one stage per command, on any Linux machine with one NVIDIA GPU.
# `bash scripts/device/measure.sh --help` says how to run it. A smoke test of a stage on a CPU
# shrinks the model by its fields (the recipe's model keys override model=NAME):
#   measure.sh en_de model.d_model=32 model.ffn_dim=64 model.encoder_layers=1 model.decoder_layers=1 \
#     data.vocab_size=1000 trainer.max_steps=20 trainer.val_check_interval=10
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bash scripts/device/measure.sh [--out DIR] STAGE [ARGS...]

Stages (each sized to finish in about ten minutes on one recent GPU):
  en_de | de_en  train the GPU recipe multi30k_<stage>_gpu (tokenizer to test), then qkvmt evaluate on
                 test_2016_flickr with the tokenized references (bleu_tok_lc): metrics.json,
                 report.html, curve.png. ARGS: overrides for qkvmt train.
  bench          qkvmt benchmark model=base, bf16, 25k-token batches: training tokens/s and
                 MFU of ours, nn.Transformer and HF Marian, beam-5 decoding of 1,000 validation
                 sentences in one batch, 10 of our steps under torch.profiler (profile.txt); ours
                 with each other attention kernel (sdpa_efficient.json, sdpa_math.json); then ours
                 alone with compile=true, lengths padded to multiples of 8 and 20 warm-up steps
                 to compile in, 10 of its steps profiled (profile_compiled.txt). ARGS: overrides
                 for qkvmt benchmark.
  graphs         the compiled step before and after CUDA graphs: ours alone, model=base, bf16,
                 25k-token batches, lengths in multiples of 8, compile_mode=default then
                 reduce-overhead, each with 10 steps profiled (benchmark_compiled.json,
                 profile_compiled.txt; benchmark_graphs.json, profile_graphs.txt). ARGS:
                 overrides for both runs of qkvmt benchmark.
  sweep          variants of a GPU recipe trained side by side on the one GPU, to choose one by
                 validation BLEU: sweep.tsv. Each ARG is one variant's overrides, quoted:
                   measure.sh sweep 'model.dropout=0.2' 'model.dropout=0.3 module.optimizer.lr=7e-4'
                 SWEEP_EXPERIMENT names the recipe (default multi30k_en_de_gpu). Wall times are
                 shared-GPU times: time the chosen variant alone with its own stage.

Where things go:
  --out DIR             what the stage measured, small enough to keep (logs, metrics, reports,
                        gpu.txt: GPU, torch, commit); default $QKVMT_GPU_RESULTS, else
                        outputs/gpu-results (git-ignored)
  QKVMT_GPU_RUNS        the run folders with their checkpoints (default outputs/gpu-runs); a stage
                        starts its runs afresh
  QKVMT_MULTI30K        Multi30k with its tok/ references; default .device-data/multi30k where
                        scripts/device/prepare.sh made it, else data/multi30k
Python needs the project's dependencies, installed (pip install -e ".[bench]") or as wheels in
.whl/ (scripts/device/prepare.sh, for a GPU machine without network), which are then installed
into a temporary folder for this command only. Relative paths are taken from where you run it.
EOF
}

out=${QKVMT_GPU_RESULTS:-outputs/gpu-results}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    -o|--out) [ $# -ge 2 ] || { echo "measure.sh: $1 needs a folder" >&2; exit 2; }; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    *) break ;;
  esac
done
stage=${1:-}
case "$stage" in
  en_de|de_en|bench|graphs|sweep) shift ;;
  "") usage >&2; exit 2 ;;
  *) echo "measure.sh: unknown stage '$stage': use en_de, de_en, bench, graphs or sweep (--help)" >&2; exit 2 ;;
esac
if [ "$stage" = sweep ] && [ $# -eq 0 ]; then
  echo "measure.sh: sweep needs each variant's overrides as one quoted argument (--help)" >&2; exit 2
fi
# Paths given relative to where the command runs; the stages run from the repository root.
out=$(realpath -m "$out")
runs=$(realpath -m "${QKVMT_GPU_RUNS:-outputs/gpu-runs}")
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${QKVMT_MULTI30K:-}" ]; then data=$(realpath -m "$QKVMT_MULTI30K")
elif [ -d "$root/.device-data/multi30k" ]; then data=$root/.device-data/multi30k
else data=$root/data/multi30k; fi
if [ "$stage" = en_de ] || [ "$stage" = de_en ]; then
  ref=$data/tok/test_2016_flickr.lc.norm.tok.${stage#*_}.gz  # checked now, not after the training
  [ -f "$ref" ] || { echo "measure.sh: no $ref: set QKVMT_MULTI30K to a Multi30k folder with tok/, or run scripts/device/prepare.sh" >&2; exit 2; }
fi
cd "$root"
mkdir -p "$out" "$runs"
if [ -d .whl ]; then
  site=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
  export PYTHONPATH=$site:$root/src
else
  export PYTHONPATH=$root/src
fi
export QKVMT_MULTI30K=$data PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
} | tee "$out/gpu.txt"
base=(model=base precision=bf16 data.max_tokens=25000 'decode.ctranslate2=[]')
compiled_run() {  # NAME MODE [overrides...]: ours alone, compiled in MODE, 10 steps profiled
  local name=$1 mode=$2
  shift 2
  rm -rf "$runs/bench_$name"  # the benchmark writes only into a new or empty folder
  # the mode and folder last: the overrides may change the rest, not which run this is
  python3 scripts/benchmark.py "${base[@]}" data.length_multiple=8 train.warmup_steps=20 'systems=[ours]' 'scaling.lengths=[]' 'scaling.corpus_pairs=[]' analysis.sentences=0 train.profile_steps=10 "$@" compile=true compile_mode="$mode" output_dir="$runs/bench_$name" 2>&1 | tee "$out/bench_$name.log"
  cp "$runs/bench_$name/benchmark.json" "$out/benchmark_$name.json"
  if [ -f "$runs/bench_$name/profile.txt" ]; then cp "$runs/bench_$name/profile.txt" "$out/profile_$name.txt"; fi
}
case "$stage" in
  en_de|de_en)
    exp=multi30k_${stage}_gpu run=$runs/multi30k_${stage}_gpu
    rm -rf "$run"  # an earlier run in the folder would be resumed, not measured
    start=$(date +%s)
    python3 scripts/train.py experiment="$exp" hydra.run.dir="$run" "$@" 2>&1 | tee "$out/train.log"
    cp "$run/train_metrics.json" "$out/"  # kept even if the evaluation fails or is stopped
    python3 scripts/evaluate.py ckpt_path="$run/checkpoints/averaged_last10.ckpt" split=test_2016_flickr \
      ref_tok_file="$ref" output_dir="$run/test" 2>&1 | tee "$out/evaluate.log"
    echo "wall_s tokenizer to report: $(( $(date +%s) - start ))" | tee -a "$out/gpu.txt"
    cp "$run/test/metrics.json" "$run/test/report.html" "$out/"
    if [ -f "$run/test/curve.png" ]; then cp "$run/test/curve.png" "$out/"; fi
    ;;
  bench)
    rm -rf "$runs"/bench "$runs"/bench_*  # the benchmark writes only into a new or empty folder
    # tokenizing a large corpus is CPU work, measured by the CPU benchmark; here it would only take time
    python3 scripts/benchmark.py "${base[@]}" decode.sentences=1000 'scaling.corpus_pairs=[]' train.profile_steps=10 output_dir="$runs/bench" "$@" 2>&1 | tee "$out/bench.log"
    cp "$runs/bench/benchmark.json" "$out/benchmark.json"  # kept even if the compiled run fails or is stopped
    if [ -f "$runs/bench/profile.txt" ]; then cp "$runs/bench/profile.txt" "$out/"; fi  # none if overridden away
    for kernel in efficient math; do  # the profile's attention kernel against these; one a device lacks is skipped
      if python3 scripts/benchmark.py "${base[@]}" sdpa_backend=$kernel 'systems=[ours]' decode.sentences=100 'scaling.lengths=[]' 'scaling.corpus_pairs=[]' analysis.sentences=0 output_dir="$runs/bench_$kernel" "$@" > "$out/bench_$kernel.log" 2>&1; then
        cp "$runs/bench_$kernel/benchmark.json" "$out/sdpa_$kernel.json"
      else
        echo "measure.sh: sdpa_backend=$kernel failed (bench_$kernel.log); going on" >&2
      fi
    done
    # Lengths in multiples of 8: a compiled graph holds for every batch (it specializes on a
    # length's divisibility); the warm-up compiles it, and once more where source and target
    # lengths first differ. Compiling model=base takes about 100 s on an H100.
    compiled_run compiled default "$@"
    ;;
  graphs)
    # The same compiled step, then with each batch shape's CUDA graph recorded and replayed
    # (5 shapes at 25k tokens on Multi30k): the profiles before and after, from one call.
    compiled_run compiled default "$@"
    compiled_run graphs reduce-overhead "$@"
    ;;
  sweep)
    # Side by side because a step of these small models leaves the GPU mostly idle.
    exp=${SWEEP_EXPERIMENT:-multi30k_en_de_gpu}
    variants=("$@")
    rm -rf "$runs/sweep" && mkdir -p "$runs/sweep"
    set -f  # a variant is split into overrides at spaces, but a list such as [1,2] is not a file pattern
    for i in "${!variants[@]}"; do
      # shellcheck disable=SC2086
      python3 scripts/train.py experiment="$exp" hydra.run.dir="$runs/sweep/$i" ${variants[$i]} > "$runs/sweep/$i.log" 2>&1 &
    done
    set +f
    wait  # a variant that fails shows as "failed" below; the others' figures stand
    printf 'variant\tbest_val_bleu\tsteps\twall_s\ttest_bleu\toverrides\n' > "$out/sweep.tsv"
    for i in "${!variants[@]}"; do
      m="$runs/sweep/$i/train_metrics.json"
      python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(sys.argv[2], *(m[k] for k in ("best_val_bleu", "steps", "wall_s", "test_bleu")), sys.argv[3], sep="\t")' \
        "$m" "$i" "${variants[$i]}" >> "$out/sweep.tsv" 2>/dev/null || printf '%s\tfailed\t\t\t\t%s\n' "$i" "${variants[$i]}" >> "$out/sweep.tsv"
      { echo "== variant $i: ${variants[$i]}"; tail -n 25 "$runs/sweep/$i.log"; } >> "$out/sweep.log"
    done
    cat "$out/sweep.tsv"
    ;;
esac
