#!/usr/bin/env bash
# Issue 14's measurements, one stage per device call (each stays under the 10-minute limit):
#   en_de | de_en: train the GPU preset (tokenizer to test), then evaluate.py on test_2016_flickr
#                  with the tokenized references (bleu_tok_lc), report.html and curve.png;
#   bench:         scripts/benchmark.py model=base, bf16, 25k-token batches: training tokens/s and MFU
#                  of ours, nn.Transformer and HF Marian, and beam-5 decoding of 1,000 validation
#                  sentences in one batch at a fixed length (ours and HF generate), 10 steps of
#                  ours under torch.profiler (profile.txt); then ours alone with compile=true;
#   sweep:         variants of a GPU preset side by side, each argument one variant's overrides
#                  (SWEEP_EXPERIMENT, default multi30k_en_de_gpu): sweep.tsv, to choose by val BLEU.
# Run on the GPU machine from the repository root, with .whl and .device-data carried
# (scripts/device/prepare.sh makes them). What comes back is written to $OUT.
# Further arguments are overrides for train.py or benchmark.py (a smoke test on a CPU:
#   bash scripts/device/measure.sh en_de model.d_model=32 model.ffn_dim=64 model.encoder_layers=1 \
#        model.decoder_layers=1 data.vocab_size=1000 trainer.max_steps=20 trainer.val_check_interval=10;
#   the preset's model keys override model=NAME, so name the fields).
set -euo pipefail
stage=${1:?stage: en_de, de_en, bench or sweep}
shift
out=${OUT:-outputs/device}
mkdir -p "$out"
if [ -d .whl ]; then
  site=$(mktemp -d)  # the carried wheels, installed for this call only
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
  export PYTHONPATH=$site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
export QKVMT_MULTI30K=${QKVMT_MULTI30K:-$PWD/.device-data/multi30k} PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"
  python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
} | tee "$out/gpu.txt"
runs=${RUNS:-outputs/device_runs}  # beside train.py's own outputs/ (git-ignored)
case "$stage" in
  en_de|de_en)
    tgt=${stage#*_}
    exp=multi30k_${stage}_gpu run=$runs/$exp
    rm -rf "$run"  # a warm machine's earlier run would be resumed, not measured
    start=$(date +%s)
    python3 scripts/train.py experiment="$exp" hydra.run.dir="$run" "$@" 2>&1 | tee "$out/train.log"
    cp "$run/train_metrics.json" "$out/"  # kept even if evaluation runs past the call's limit
    python3 scripts/evaluate.py ckpt_path="$run/checkpoints/averaged_last10.ckpt" split=test_2016_flickr \
      ref_tok_file="$QKVMT_MULTI30K/tok/test_2016_flickr.lc.norm.tok.$tgt.gz" output_dir="$run/test" 2>&1 | tee "$out/evaluate.log"
    echo "wall_s tokenizer to report: $(( $(date +%s) - start ))" | tee -a "$out/gpu.txt"
    cp "$run/test/metrics.json" "$run/test/report.html" "$out/"
    if [ -f "$run/test/curve.png" ]; then cp "$run/test/curve.png" "$out/"; fi
    ;;
  bench)
    base=(model=base precision=bf16 data.max_tokens=25000 'decode.ctranslate2=[]')
    # tokenizing a large corpus is CPU work: left to the CPU figures, it would take this call's time
    python3 scripts/benchmark.py "${base[@]}" decode.sentences=1000 'scaling.corpus_pairs=[]' train.profile_steps=10 output_dir="$runs/bench" "$@" 2>&1 | tee "$out/bench.log"
    cp "$runs/bench/benchmark.json" "$out/benchmark.json"  # kept even if the compiled run outlasts the call
    if [ -f "$runs/bench/profile.txt" ]; then cp "$runs/bench/profile.txt" "$out/"; fi  # none if overridden away
    python3 scripts/benchmark.py "${base[@]}" compile=true 'systems=[ours]' 'scaling.lengths=[]' 'scaling.corpus_pairs=[]' analysis.sentences=0 output_dir="$runs/bench_compiled" "$@" 2>&1 | tee "$out/bench_compiled.log"
    cp "$runs/bench_compiled/benchmark.json" "$out/benchmark_compiled.json"
    ;;
  sweep)
    # Variants of a GPU preset trained side by side on the one GPU (a step of these small models
    # leaves it mostly idle), to choose a recipe by validation BLEU. Each argument is one variant's
    # overrides, quoted; SWEEP_EXPERIMENT names the preset (default multi30k_en_de_gpu). Their
    # wall times are shared-GPU times: measure the chosen one alone with its own stage.
    [ $# -gt 0 ] || { echo "sweep: give each variant's overrides as one quoted argument" >&2; exit 2; }
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
  *) echo "unknown stage $stage: use en_de, de_en, bench or sweep" >&2; exit 2 ;;
esac
