#!/usr/bin/env bash
# The thirty-ninth session's second call (its log in $OUT/session39_sass.log): why 8B Q4 prompt products trail f16
# ones. The machine code of Llama's gate_up at M = 512 (f16, Q4_0, Q4_K tiles) of MAIN and CAND2 (each chunk's words
# loaded once for its 4 slabs, picked by selects) in $OUT/sass-NAME.tar.gz with bench/sass/sass_summary.py's lines;
# that product's time and pp512 of random-block Llama-3-8B Q4_0 and Q4_K_M files for MAIN, HOIST (only a row's
# first word computed once a tile) and CAND2; on an H200, also random f16 weights' pp512 and the first token after
# load (issue 22's measure, timed on H100s only so far).
# Carry .device/{s39,lib,bin,debs,gpu-env.sh}.
#   bench/device/session39_sass.sh MAIN HOIST CAND2
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session39_sass.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
files=$!
for b in "$1" "$3"; do
  section "machine code: $(basename "$b")"
  machine_code_as "sass-$(basename "$b")" "$b" bench kernels --kernel linear --shape "llama gate_up M=512 " \
    --iterations 3 | grep -E "M=512|^obj|programs from" | cut -c1-110
done
binaries=("$1" "$2" "$3")
for b in "${binaries[@]}"; do
  section "M = 512 products: $(basename "$b")"
  timeout 150 "$b" bench kernels --kernel linear --shape "llama gate_up M=512 " | grep -E "M=512" |
    grep -E "f16 tiled split |Q4_0|Q4_K" | cut -c1-110
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  f16_models "$1" llama
  binaries=("$1" "$3")
  rounds 1 "8B F16" bench model --model /tmp/l8 -p 512 -g 16 -r 3 -d 0
  rm -rf /tmp/l8
  binaries=("$1" "$2" "$3")
fi
wait "$files"
rounds 2 "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 512 -g 16 -r 3 -d 0
rounds 1 "8B Q4_K_M" bench model --model /tmp/llama3-8b-Q4_K_M.gguf -p 512 -g 16 -r 3 -d 0
section done
