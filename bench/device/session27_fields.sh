#!/usr/bin/env bash
# The twenty-seventh session's third H200 call: every block type's quants decoded where they lie in their word
# (linear_q_matvec.wgsl's field_quants) against main. `bench kernels` on Llama-3-8B's gate_up and down at M = 1;
# tg128 of random Llama-3-8B Q4_0 and Q4_K_M files and Qwen2.5-0.5B Q8_0 and Q4_K_M ones, two rounds in turn;
# 2 and 4 sequences of the 8B Q4_0 file (up to 4 rows these products take this kernel).
#   bench/device/session27_fields.sh BASE CANDIDATE   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M
linear_products "Q[0-9]_[0-9K]" "llama gate_up M=1 " "llama down M=1 "
wait
for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M qwen2.5-0.5b-Q8_0 qwen2.5-0.5b-Q4_K_M; do
  rounds 2 "$f" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0
done
each "llama3-8b-Q4_0 batched" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 16 -g 64 -r 2 --batch 2,4
section done
