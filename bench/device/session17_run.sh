#!/usr/bin/env bash
# One H200 device call for the seventeenth session's tables: gerbil-base (main at the session's start) against
# gerbil-cand (K/V tiles staged a cache word at a time, block-quantized weights through linear_rows), interleaved,
# on random weights of Qwen2.5-0.5B's shape (an f16 folder from `gerbil synth`) and of Llama-3-8B's (Q4_0 and
# Q4_K_M GGUF files from bench/device/random_gguf.py):
#   - long prompts: pp512, pp8192 with f16 (the default), q8 and f32 caches;
#   - batched decoding: 1-64 sequences of the 0.5B, 1-16 of the 8B files;
#   - decoding at depth 8,192 against gerbil-comb (flash_attention_combine walks the split records in groups), and
#     the per-dispatch profile of a decode step there (gerbil-base), for what decode attention costs.
#   bench/device/session17_run.sh DIR   (DIR holds gerbil-base, gerbil-cand, gerbil-comb)
# Everything goes to stdout.
source "$(dirname "$0")/common.sh"
dir=$(realpath "$1")
ab() {  # ab LABEL "NAMES" ARGS...: each named binary present in DIR (gerbil-NAME) in turn, through each()
  local label=$1 names=$2 name; shift 2
  binaries=()
  for name in $names; do
    if [ -x "$dir/gerbil-$name" ]; then binaries+=("$dir/gerbil-$name"); fi
  done
  each "$label" "$@"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/l8.gguf &
"$dir/gerbil-base" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
q05=(bench model --model /tmp/q05)
ab "0.5B prompts" "base cand" "${q05[@]}" -p 512 -g 1 -r 3
ab "0.5B long prompt, f16 cache" "base cand" "${q05[@]}" -p 8192 -g 1 -r 3 --ctx 8448
ab "0.5B long prompt, q8 cache" "base cand" "${q05[@]}" -p 8192 -g 1 -r 3 --ctx 8448 --kv-cache q8
ab "0.5B long prompt, f32 cache" "base cand" "${q05[@]}" -p 8192 -g 1 -r 3 --ctx 8448 --kv-cache f32
ab "0.5B batched" "base cand" "${q05[@]}" -p 128 -g 128 --batch 1,4,16,64
ab "0.5B decode at depth" "base comb" "${q05[@]}" -p 16 -g 128 -d 0 8192 -r 2 --ctx 8448
section "0.5B decode step profile at depth 8192: base"
timeout 200 "$dir/gerbil-base" "${q05[@]}" -p 16 -g 32 -d 8192 -r 1 --ctx 8448 --profile | tail -40
wait
python3 bench/device/random_gguf.py llama3-8b Q4_K_M /tmp/l8k.gguf &
l8=(bench model --model /tmp/l8.gguf)
ab "8B Q4_0 long prompt" "base cand" "${l8[@]}" -p 8192 -g 1 -r 2 --ctx 8448
ab "8B Q4_0 batched" "base cand" "${l8[@]}" -p 128 -g 128 --batch 1,4,8,16
ab "8B Q4_0 decode at depth" "base comb" "${l8[@]}" -p 16 -g 128 -d 8192 -r 2 --ctx 8448
section "8B Q4_0 decode step profile at depth 8192: base"
timeout 200 "$dir/gerbil-base" "${l8[@]}" -p 16 -g 32 -d 8192 -r 1 --ctx 8448 --profile | tail -30
wait
ab "8B Q4_K_M batched" "base cand" bench model --model /tmp/l8k.gguf -p 128 -g 128 --batch 1,4,8,16
section done
