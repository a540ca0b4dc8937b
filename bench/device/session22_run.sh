#!/usr/bin/env bash
# The twenty-second session's H200 call: decode products of block-quantized weights multiplying integer quants by
# x's 24-bit digits four at a time (dot4I8Packed; gerbil-cand) against f32 x (gerbil-base): `bench kernels` on the
# decode shapes, the machine code of the candidate's linear_q_matvec (does dot4I8Packed become IDP4A?), then
# `bench model` pp512 / tg128 on random GGUF files of Llama-3-8B's shape (Q4_0, Q4_K_M) and Qwen2.5-0.5B's (Q8_0,
# Q4_K_M), each binary in turn.
#   bench/device/session22_run.sh BASE CAND   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
decode_products "${binaries[@]}"
section "machine code of $(basename "$2")'s decode products"
machine_code "$2" bench kernels --kernel linear --shape "llama down M=1 " --iterations 3 > /dev/null
grep -l "IDP" /tmp/sass/*.sass | head; grep -c "IDP" /tmp/sass/*.sass | grep -v ":0"
wait
for f in "${quant_files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 512 -g 128 -r 2
done
section done
