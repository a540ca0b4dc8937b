#!/usr/bin/env bash
# The thirty-ninth session's fifth call (its log in $OUT/session39_probe.log): what bounds the decode products, for
# the next session. The machine code of `bench kernels --kernel linear` on Llama's gate_up at M = 16 (linear_rows, a
# batched step) and M = 1 (linear_q_matvec and the f16 matrix-vector kernels) in $OUT/sass-rows.tar.gz with
# bench/sass/sass_summary.py's lines; and what Dawn's bounds checks cost there: batched decoding of random f16
# Llama-3-8B weights at 16 sequences and tg128 of a random-block 8B Q4_0 file, with and without
# --toggle disable_robustness. On an H200 also the f16 8B's pp512 and first token after load.
# Carry .device/{s39,lib,bin,debs,gpu-env.sh}.
#   bench/device/session39_probe.sh GERBIL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session39_probe.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs llama3-8b:Q4_0
files=$!
section "machine code"
for shape in "llama gate_up M=16 " "llama gate_up M=1 "; do
  machine_code_as sass-rows "$1" bench kernels --kernel linear --shape "$shape" --iterations 5 |
    grep -E "M=1|^obj|programs from" | cut -c1-110
done
f16_models "$1" llama
for toggle in "" "--toggle disable_robustness"; do
  section "8B F16 batched $toggle"
  timeout 200 "$1" bench model --model /tmp/l8 -p 128 -g 32 -r 1 --batch 16 $toggle | rows
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  section "8B F16 pp512 and first token"
  timeout 200 "$1" bench model --model /tmp/l8 -p 512 -g 16 -r 3 -d 0 | rows
fi
rm -rf /tmp/l8
wait "$files"
for toggle in "" "--toggle disable_robustness"; do
  section "8B Q4_0 $toggle"
  timeout 200 "$1" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 512 -g 128 -r 3 -d 0 $toggle | rows
done
section done
