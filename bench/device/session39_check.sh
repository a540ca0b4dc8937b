#!/usr/bin/env bash
# The thirty-ninth session's fourth call (its log in $OUT/session39_check.log): the prompt kernel taking two slabs a
# turn (UNROLL) on a real GPU: test_kernels_quant's prompt products against float64 and `gerbil selftest --kernel
# linear`; then, against MAIN, pp8192 of random f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes (issue 22
# asks 90 % of pp512) and batched decoding at 16 and 64 sequences (from 17 rows a step takes the tiled kernel).
# Carry .device/{s39,lib,bin,debs,gpu-env.sh}.
#   bench/device/session39_check.sh MAIN UNROLL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session39_check.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
section "UNROLL against float64"
timeout 200 .device/s39/test_kernels_quant --gtest_brief=1 --gtest_filter='*Prompt*' 2>&1 | tail -3
timeout 120 "$2" selftest --kernel linear 2>&1 | tail -2
f16_models "$1" qwen llama
binaries=("$1" "$2")
rounds 1 "0.5B pp8192" bench model --model /tmp/q -p 8192 -g 16 -r 2 -d 0
rounds 1 "8B pp8192" bench model --model /tmp/l8 -p 8192 -g 16 -r 2 -d 0
rounds 1 "8B batched" bench model --model /tmp/l8 -p 128 -g 32 -r 1 --batch 16 64
rounds 1 "0.5B batched" bench model --model /tmp/q -p 128 -g 128 -r 1 --batch 64
section done
