#!/usr/bin/env bash
# The twenty-seventh session's fifth H200 call: linear_q_matvec.wgsl in workgroups of 128 threads (x still staged
# 16 KiB at a time) against main's 256. At 67 registers a thread an SM holds three workgroups of 256 (24 warps)
# or seven of 128 (28). `bench kernels` on Llama-3-8B's gate_up, down and o at M = 1; tg128 of random Llama-3-8B
# Q4_0 and Q4_K_M files, two rounds in turn.
#   bench/device/session27_wg128.sh BASE CANDIDATE   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
linear_products "Q4_[0K]" "llama gate_up M=1 " "llama down M=1 " "llama o M=1 "
wait
for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M; do
  rounds 2 "$f" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0
done
section done
