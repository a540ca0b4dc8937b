#!/usr/bin/env bash
# H200 run 49 (session 6): the final code (the tiled prompt kernel's slab written out, [buffer][k][slot] arrays,
# no split from two waves of tiles on) checked (selftest, GPU tests) and measured against the committed code
# (gerbil-s5) on llama3-8b and qwen2.5-0.5b at depths 0 and 2048.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil selftest
step 60 test_graph_fixtures --gtest_brief=1
step 90 test_kernels_model --gtest_brief=1
step 40 test_generate_gpu_sampling --gtest_brief=1
step 30 test_gpu --gtest_brief=1
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step 90 gerbil-s5 bench model --model /tmp/llama8 -r 3 -d 0 2048
step 90 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048
step 30 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s5 gerbil gerbil-s5 gerbil; do step 40 $b bench model --model /tmp/qwen05 -d 0 2048; done
step 90 gerbil bench kernels --kernel linear --shape "M=512" --iterations 30
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|PASSED|FAILED|rc=[^0]" $o/log.txt | tail -50
