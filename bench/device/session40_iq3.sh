#!/usr/bin/env bash
# Written in the fortieth session, which was lent no GPU; for the next call (its log in $OUT/session40_iq3.log): the
# IQ3 types on a real GPU. test_kernels_quant's IQ3_XXS / IQ3_S cases against float64, then pp512 / tg128 of random
# Llama-3-8B-shaped files (random_gguf.py): IQ3_M (IQ3_S, Q4_K for attn_output / attn_v, Q6_K output) and IQ3_XXS
# against IQ4_XS and Q4_K_M in the same call (the IQ3 types run IQ4_XS's kernels, with their own scale decode).
# Carry .device/{s40,lib,bin,debs,gpu-env.sh}.
#   bench/device/session40_iq3.sh GERBIL TEST_KERNELS_QUANT
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session40_iq3.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs llama3-8b:IQ3_M llama3-8b:IQ3_XXS llama3-8b:IQ4_XS llama3-8b:Q4_K_M
section "IQ3 kernels against float64"
timeout 300 "$2" --gtest_brief=1 --gtest_filter='*IQ3*' 2>&1 | tail -3
wait
binaries=("$1")
for f in IQ3_M IQ3_XXS IQ4_XS Q4_K_M; do
  rounds 1 "8B $f" bench model --model "/tmp/llama3-8b-$f.gguf" -p 512 -g 128 -r 3 -d 0
done
section done
