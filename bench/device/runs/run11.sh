#!/usr/bin/env bash
# H200 run 11: decode attention with subgroups (flash_attention_sg) against run 9's binary (gerbil-run9).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
step 60 gerbil selftest --kernel flash_attention
step 40 test_graph_fixtures --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil bench model --model /tmp/qwen05 -p 16 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 40 gerbil-run9 bench model --model /tmp/qwen05 -p 16 > $o/qwen05_run9.txt 2>>$o/log.txt
step 150 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 120 gerbil bench model --model /tmp/llama8 -r 3 -p 16 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 80 gerbil-run9 bench model --model /tmp/llama8 -r 3 -p 16 > $o/llama8_run9.txt 2>>$o/log.txt
date >> $o/log.txt
