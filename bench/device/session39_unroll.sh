#!/usr/bin/env bash
# The thirty-ninth session's third call (its log in $OUT/session39_unroll.log): the prompt kernel's slab loop taking
# two slabs a turn, one from each buffer (UNROLL, with HOIST's change), against MAIN and HOIST (a block row's first
# word computed once a tile): UNROLL's machine code for Llama's gate_up at M = 512 ($OUT/sass-NAME.tar.gz and
# bench/sass/sass_summary.py's lines), that product's time for each binary, pp512 of random f16 weights of
# Llama-3-8B's and Qwen2.5-0.5B's shapes (MAIN, UNROLL) and of random-block Llama-3-8B Q4_0 and Q4_K_M files (all
# three, two rounds).
# Carry .device/{s39,lib,bin,debs,gpu-env.sh}.
#   bench/device/session39_unroll.sh MAIN HOIST UNROLL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session39_unroll.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
files=$!
section "machine code: $(basename "$3")"
machine_code_as "sass-$(basename "$3")" "$3" bench kernels --kernel linear --shape "llama gate_up M=512 " \
  --iterations 3 | grep -E "M=512|^obj|programs from" | cut -c1-110
binaries=("$1" "$2" "$3")
for b in "${binaries[@]}"; do
  section "M = 512 products: $(basename "$b")"
  timeout 150 "$b" bench kernels --kernel linear --shape "llama gate_up M=512 " | grep -E "M=512" |
    grep -E "f16 tiled|Q4_0|Q4_K" | cut -c1-110
done
f16_models "$1" llama qwen
binaries=("$1" "$3")
rounds 1 "8B F16" bench model --model /tmp/l8 -p 512 -g 16 -r 3 -d 0
rounds 1 "0.5B F16" bench model --model /tmp/q -p 512 -g 16 -r 3 -d 0
rm -rf /tmp/l8
binaries=("$1" "$2" "$3")
wait "$files"
rounds 2 "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 512 -g 16 -r 3 -d 0
rounds 2 "8B Q4_K_M" bench model --model /tmp/llama3-8b-Q4_K_M.gguf -p 512 -g 16 -r 3 -d 0
section done
