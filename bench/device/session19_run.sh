#!/usr/bin/env bash
# The nineteenth session's first H200 call: decode products of block-quantized weights that decode a quant word's
# two quads at once, each field masked in place under a float's exponent (gerbil-cand), against main
# (gerbil-base): `bench kernels` on the decode shapes, then `bench model` pp512 / tg128 on random GGUF files of
# Llama-3-8B's shape (Q4_0, Q4_K_M) and Qwen2.5-0.5B's (Q8_0, Q4_K_M), each binary in turn.
#   bench/device/session19_run.sh BASE CAND   (from the project root; output: one block per binary and section)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
section tuning; "$1" tune | tail -3
for b in "${binaries[@]}"; do
  section "decode products: $(basename "$b")"
  timeout 120 "$b" bench kernels --kernel linear --shape "M=1 " | grep -E "(Q[0-9]_[0-9K]( matvec)?|f16 matvec) +(llama|qwen)"
done
wait
for f in "${quant_files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 512 -g 128 -r 2
done
section done
