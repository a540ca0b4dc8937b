#!/usr/bin/env bash
# The thirty-eighth session's call:
#   1. why Llama-3-8B's first prompt after load stays 3-4x a warm one: session37_first_token.sh MAIN EXPERIMENT
#      (the GPU's clocks sampled through the first prompts; warm-ups of 4 and 16 rounds and of the cold prompt's
#      length), on a quiet machine;
#   2. IQ4_NL and IQ4_XS decoded natively (CAND: this session's first version, each level computed from its code by a
#      rounded quartic; not kept) against their conversion to Q8_0 at upload (MAIN): pp512 / tg128
#      on random-block Llama-3-8B files (random_gguf.py), Q4_K_M beside them; test_kernels_quant's IQ4 cases (the
#      gather and every product kernel against float64) on the GPU;
#   3. the load of an 8B Q3_K_M file with the faster Q2_K / Q3_K packer (CAND).
# Carry .device/{s37,s38,lib,bin,debs,gpu-env.sh}.
#   bench/device/session38_run.sh MAIN CAND EXPERIMENT
source "$(dirname "$0")/common.sh"
bash bench/device/session37_first_token.sh "$1" "$3"

random_ggufs llama3-8b:IQ4_XS llama3-8b:IQ4_NL llama3-8b:Q4_K_M llama3-8b:Q3_K_M
files=$!
section "IQ4 kernels against float64"
timeout 240 .device/s38/test_kernels_quant --gtest_brief=1 --gtest_filter='*IQ4*' 2>&1 | tail -6
wait "$files"
binaries=("$1" "$2")
for f in IQ4_XS IQ4_NL; do
  rounds 2 "8B $f ($(du -h /tmp/llama3-8b-$f.gguf | cut -f1))" bench model --model /tmp/llama3-8b-$f.gguf \
    -p 512 -g 128 -r 3 -d 0
done
binaries=("$2")
for f in Q4_K_M Q3_K_M; do
  each "8B $f ($(du -h /tmp/llama3-8b-$f.gguf | cut -f1))" bench model --model /tmp/llama3-8b-$f.gguf \
    -p 512 -g 128 -r 3 -d 0
done
section done
