#!/usr/bin/env bash
# H200 run 32 (session 4): prompt kernel with the 8 x 4 subgroup layout at slabs of 8 (slab 16 measured slower
# in run 31) against gerbil-s3 (04f07f8); Llama-8B with gate|up groups of two pairs; robustness off.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 test_kernels_model --gtest_brief=1
step 60 test_graph_fixtures --gtest_brief=1
timeout 80 gerbil-s3 bench kernels --kernel linear --shape "M=512" > $o/kernels_prefill_s3.txt 2>&1
timeout 80 gerbil bench kernels --kernel linear --shape "M=512" > $o/kernels_prefill.txt 2>&1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 > $o/qwen05_gerbil.txt 2>>$o/log.txt
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 80 gerbil-s3 bench model --model /tmp/llama8 -r 3 -d 0 > $o/llama8_s3.txt 2>>$o/log.txt
timeout 100 gerbil bench model --model /tmp/llama8 -r 3 -d 0 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 80 gerbil bench model --model /tmp/llama8 -r 3 -d 0 --toggle disable_robustness >> $o/llama8_gerbil.txt 2>>$o/log.txt
date >> $o/log.txt
