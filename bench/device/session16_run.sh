#!/usr/bin/env bash
# One H200 device call for the sixteenth session's tables: a baseline gerbil (BASE) against the staged one
# (CAND), interleaved, on random weights of Qwen2.5-0.5B's shape (an f16 folder from `gerbil synth`) and of
# Llama-3-8B's (a Q4_0 GGUF file from bench/device/random_gguf.py, which loads in seconds):
#   - long prompts: pp512 and pp8192 at the default prefill chunk, and pp8192 in chunks of 512 and 4,096;
#   - decoding at depths 0, 2,048 and 8,192 with the default KV cache and f32, with top-k / top-p rows and the
#     model's generation_config.json defaults;
#   - batched decoding of 1, 4, 16 and 64 sequences (128 prompt and 128 generated tokens each).
#   bench/device/session16_run.sh BASE CAND
# Dawn and the Vulkan loader staged as .device/gpu-env.sh expects. Everything goes to stdout.
set -u
cd "$(dirname "$0")/../.."
source .device/gpu-env.sh
base=$(realpath "$1") cand=$(realpath "$2")
export GERBIL_CACHE_DIR=/tmp/gerbil-cache PYTHONUNBUFFERED=1
t0=$(date +%s)
section() { echo; echo "=== [$(( $(date +%s) - t0 )) s] $*"; }
rows() { grep -E "^(pp|tg|load|model:|[0-9]+ )"; }
both() {  # both LABEL ARGS...: BASE then CAND, one run each
  local label=$1; shift
  for binary in "$base" "$cand"; do
    section "$label: $(basename "$binary") $*"
    timeout 120 "$binary" "$@" | rows
  done
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$cand" tune | tail -4
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/l8.gguf &
"$cand" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
q05=(bench model --model /tmp/q05)
both "0.5B prompts" "${q05[@]}" -p 512 -g 1 -r 3
both "0.5B long prompt" "${q05[@]}" -p 8192 -g 1 -r 3 --ctx 8448
for chunk in 512 4096; do
  section "0.5B pp8192, chunks of $chunk: CAND"
  timeout 60 "$cand" "${q05[@]}" -p 8192 -g 1 -r 3 --ctx 8448 --max-prefill-chunk $chunk | rows
done
both "0.5B decode, default cache" "${q05[@]}" -p 16 -g 128 -d 0 2048 8192 -r 2 --ctx 8448 --sampling defaults
section "0.5B decode, f32 cache: CAND"
timeout 120 "$cand" "${q05[@]}" -p 16 -g 128 -d 0 8192 -r 2 --ctx 8448 --kv-cache f32 | rows
both "0.5B batched" "${q05[@]}" -p 128 -g 128 --batch 1,4,16,64
wait
l8=(bench model --model /tmp/l8.gguf)
both "8B Q4_0 long prompt and depth" "${l8[@]}" -p 8192 -g 128 -d 8192 -r 2 --ctx 8448
both "8B Q4_0 batched" "${l8[@]}" -p 128 -g 128 --batch 4,16
section done
