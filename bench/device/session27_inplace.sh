#!/usr/bin/env bash
# The twenty-seventh session's second H200 call: 4-bit nibbles decoded in place (linear_q_matvec.wgsl) against
# main (and other candidates). `bench kernels` on Llama-3-8B's gate_up, down and o at M = 1 (Q4_0 and Q4_K rows,
# the dispatcher's blocking and teams of 16 lanes); the driver's machine code of the candidate's products
# (bench/sass); tg128 at depth 0 and 2,048 of random Llama-3-8B Q4_0 and Q4_K_M files and a Qwen2.5-0.5B Q4_K_M
# one, two rounds in turn.
#   bench/device/session27_inplace.sh BASE CANDIDATE [OTHER...]   (from the project root; machine code of CANDIDATE)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q4_K_M
blockings=(--blocking 4,16,1 --blocking 2,16,2 --blocking 4,16,2)
linear_products "Q4_(0|K)" "llama gate_up M=1 " "llama down M=1 " "llama o M=1 "
section "machine code: $(basename "$2") llama gate_up M=1"
machine_code "$2" bench kernels --kernel linear --shape "llama gate_up M=1 " --iterations 2 > /dev/null
python3 bench/sass/sass_summary.py /tmp/sass
wait
for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M qwen2.5-0.5b-Q4_K_M; do
  rounds 2 "$f" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0 2048
done
section done
