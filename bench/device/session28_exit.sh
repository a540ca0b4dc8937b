#!/usr/bin/env bash
# The twenty-eighth session's sixth H200 call: sample.wgsl's levels after the gather return on reading the previous
# level's mode alone, without copying its window (the candidate), against main at 8fa3292 (the first binary).
# tg128 of a random Qwen2.5-0.5B F16 file, greedy and sampled with both cuts (bench's "top-k 20" row, and Qwen2.5's
# settings: temperature 0.7, top-k 20, top-p 0.8, repetition penalty 1.05), three rounds in turn. Then the driver's
# machine code (registers, spills) of main's prompt products at M = 512 (Llama-3-8B's gate_up, every weight type).
#   bench/device/session28_exit.sh MAIN CANDIDATE   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs qwen2.5-0.5b:F16
wait
rounds 3 "qwen2.5-0.5b F16" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 128 -r 3 -d 0 \
  --sampling temperature=0.7,top_k=20,top_p=0.8,repetition_penalty=1.05
section "machine code: $(basename "$1") llama gate_up M=512"
machine_code "$1" bench kernels --kernel linear --shape "llama gate_up M=512" --iterations 2 > /dev/null
python3 bench/sass/sass_summary.py /tmp/sass
section done
