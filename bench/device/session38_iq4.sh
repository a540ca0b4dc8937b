#!/usr/bin/env bash
# The thirty-eighth session's second call (its log in $OUT/session38_iq4.log):
#   1. the first request after load with the warm-up that runs until the GPU's clock is up (WARM) against MAIN
#      (one prompt and one decode step): `bench model -p 16 -g 16 -r 1` on random f16 weights of Qwen2.5-0.5B's and
#      Llama-3-8B's shapes, two rounds, with the GPU's clocks sampled (nvidia-smi, $OUT/clocks.csv);
#   2. IQ4 decoded natively, two ways: POLY (each level from its code by a rounded quartic) and TABLE (the 16 levels
#      in workgroup memory; WARM is TABLE with the warm-up), against MAIN (IQ4 blocks converted to Q8_0 at upload):
#      pp512 / tg128 on a random-block Llama-3-8B IQ4_XS file; TABLE's IQ4 cases of test_kernels_quant.
# Carry .device/{s38,lib,bin,debs,gpu-env.sh}.
#   bench/device/session38_iq4.sh MAIN POLY TABLE WARM
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session38_iq4.log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader \
  -lms 20 > /tmp/clocks.csv &
sampler=$!
f16_models "$1" qwen llama
binaries=("$1" "$4")
rounds 2 "0.5B first token" bench model --model /tmp/q -p 16 -g 16 -r 1 -d 0 --ctx 4096
rounds 2 "8B first token" bench model --model /tmp/l8 -p 16 -g 16 -r 1 -d 0 --ctx 4096
kill "$sampler"
cp /tmp/clocks.csv "${OUT:-/tmp}/clocks.csv"
rm -rf /tmp/l8

random_ggufs llama3-8b:IQ4_XS
files=$!
section "IQ4 kernels against float64 (TABLE)"
timeout 240 .device/s38/test_kernels_quant --gtest_brief=1 --gtest_filter='*IQ4*' 2>&1 | tail -4
wait "$files"
binaries=("$1" "$2" "$3")
rounds 1 "8B IQ4_XS" bench model --model /tmp/llama3-8b-IQ4_XS.gguf -p 512 -g 128 -r 3 -d 0
section done
