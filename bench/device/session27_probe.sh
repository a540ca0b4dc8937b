#!/usr/bin/env bash
# The twenty-seventh session's first H200 call: what bounds the 4-bit decode products. Main (the first binary) and
# two probes of linear_q_matvec.wgsl's Q4_0 loop that are not in the repository: `noalu` keeps every load of
# weights and a staged x but folds each chunk into one dot product (no decoding), `nostage` also leaves x
# unstaged (no workgroup memory, no barriers). `bench kernels` on Llama-3-8B's gate_up and down at M = 1 with
# five blockings each; the driver's machine code of main's products (bench/sass); tg128 of a random Llama-3-8B
# Q4_0 file, two rounds.
#   bench/device/session27_probe.sh BASE PROBE...   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0
blockings=(--blocking 4,32,1 --blocking 4,32,2 --blocking 2,32,2 --blocking 1,32,2 --blocking 4,64,1)
linear_products "Q4_0" "llama gate_up M=1 " "llama down M=1 "
section "machine code: $(basename "$1") llama gate_up M=1"
machine_code "$1" bench kernels --kernel linear --shape "llama gate_up M=1 " --iterations 2 > /dev/null
python3 bench/sass/sass_summary.py /tmp/sass
wait
rounds 2 "llama3-8b Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 16 -g 128 -r 2
section done
