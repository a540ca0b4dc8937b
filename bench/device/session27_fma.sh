#!/usr/bin/env bash
# The twenty-seventh session's fourth H200 call: linear_q_matvec.wgsl's dot products as chains of four
# multiply-adds (dot_add) on top of the in-place decoding, against main and the in-place decoding alone. `bench
# kernels` on Llama-3-8B's gate_up and down at M = 1; tg128 of random Llama-3-8B Q4_0 and Q4_K_M files, two rounds
# in turn.
#   bench/device/session27_fma.sh BASE FIELDS FMA   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
linear_products "Q[0-9]_[0-9K]" "llama gate_up M=1 " "llama down M=1 "
wait
for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M; do
  rounds 2 "$f" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0
done
section done
