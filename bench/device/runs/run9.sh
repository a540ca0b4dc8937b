#!/usr/bin/env bash
# H200 run 9: RMSNorm squares summed in the matrix-vector kernel's main loop (no extra pass), always fused.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
step 40 gerbil selftest --kernel linear_fused
step 40 test_graph_fixtures --gtest_brief=1
step 150 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 100 gerbil bench model --model /tmp/llama8 -r 3 -d 0 -p 16 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 60 gerbil-prev bench model --model /tmp/llama8 -r 3 -d 0 -p 16 > $o/llama8_prev.txt 2>>$o/log.txt
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 40 gerbil bench model --model /tmp/qwen05 -d 0 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 30 gerbil-prev bench model --model /tmp/qwen05 -d 0 > $o/qwen05_prev.txt 2>>$o/log.txt
date >> $o/log.txt
