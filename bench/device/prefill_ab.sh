#!/usr/bin/env bash
# Long prompts on the H200, two gerbil binaries interleaved in one call: pp512 and pp8192 (prefill chunks of 512,
# and of 2,048, the default since the sixteenth session) on Qwen2.5-0.5B's shape (a random f16 folder) and
# Llama-3-8B's (a random Q4_0 GGUF file: it loads in seconds, and its attention is the f16 model's).
#   bench/device/prefill_ab.sh BASE CANDIDATE [RANDOM_GGUF_PY]
# Dawn and the Vulkan loader staged as bench/device's other scripts expect (.device/gpu-env.sh). Output: stdout.
set -u
cd "$(dirname "$0")/../.." 2>/dev/null || true
source .device/gpu-env.sh
base=$(realpath "$1") cand=$(realpath "$2") make_gguf=${3:-bench/device/random_gguf.py}
export GERBIL_CACHE_DIR=/tmp/gerbil-cache
t0=$(date +%s)
section() { echo; echo "=== [$(( $(date +%s) - t0 )) s] $*"; }
rows() { grep -E "^(pp|tg|load)"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$cand" tune | tail -3
python3 "$make_gguf" llama3-8b Q4_0 /tmp/l8-q4_0.gguf &
maker=$!
"$cand" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
for round in 1 2; do
  for binary in "$base" "$cand"; do
    section "round $round, $(basename "$binary"), qwen2.5-0.5b"
    timeout 60 "$binary" bench model --model /tmp/q05 -p 512 -g 16 -r 3 | rows
    timeout 60 "$binary" bench model --model /tmp/q05 -p 8192 -g 16 -r 3 --ctx 8448 --max-prefill-chunk 512 | rows
    timeout 60 "$binary" bench model --model /tmp/q05 -p 8192 -g 16 -r 3 --ctx 8448 --max-prefill-chunk 2048 | rows
  done
done
wait $maker
for round in 1 2; do
  for binary in "$base" "$cand"; do
    section "round $round, $(basename "$binary"), llama3-8b Q4_0"
    timeout 60 "$binary" bench model --model /tmp/l8-q4_0.gguf -p 512 -g 16 -r 2 | rows
    timeout 90 "$binary" bench model --model /tmp/l8-q4_0.gguf -p 8192 -g 16 -r 2 --ctx 8448 --max-prefill-chunk 512 | rows
  done
done
section "cand profile, qwen2.5-0.5b pp8192: the last 2,048-token chunk"
timeout 60 "$cand" bench model --model /tmp/q05 -p 8192 -g 16 -r 1 --ctx 8448 --profile | grep -iE "attention|prefill|total|combine" | head -20
section done
