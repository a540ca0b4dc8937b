#!/usr/bin/env bash
# The thirty-ninth session's first call (its log in $OUT/session39_q4prompt.log): 8B prompts of block-quantized
# weights with each chunk's words loaded and its scale decoded once for its 4 slabs (CAND) against MAIN (both
# slab by slab): `bench kernels` on Llama's M = 512 products, then pp512 of random-block Llama-3-8B Q4_0 and
# Q4_K_M files, two rounds, beside the same binaries' pp512 of random f16 weights (issue 21 asks Q4 prompts at
# least as fast as f16 ones).
# Carry .device/{s39,lib,bin,debs,gpu-env.sh}.
#   bench/device/session39_q4prompt.sh MAIN CAND
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session39_q4prompt.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
files=$!
binaries=("$1" "$2")
for b in "${binaries[@]}"; do
  section "M = 512 products: $(basename "$b")"
  timeout 150 "$b" bench kernels --kernel linear --shape "llama gate_up M=512 " | grep -E "M=512" |
    grep -E "f16|Q4_0|Q4_K" | cut -c1-120
done
f16_models "$1" llama
rounds 1 "8B F16" bench model --model /tmp/l8 -p 512 -g 16 -r 3 -d 0
rm -rf /tmp/l8
wait "$files"
rounds 2 "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 512 -g 16 -r 3 -d 0
rounds 2 "8B Q4_K_M" bench model --model /tmp/llama3-8b-Q4_K_M.gguf -p 512 -g 16 -r 3 -d 0
section done
