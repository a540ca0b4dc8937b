#!/usr/bin/env bash
# H200 run 42 (session 5): decode products that write the residual stream prepare the next RMSNorm
# (x * weight and partial sums of squares) for the product after it; gerbil-s4 = 69ec116 (before).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil selftest
step 40 test_graph_fixtures --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s4 gerbil gerbil-s4 gerbil; do echo "== $b" >> $o/qwen05.txt; timeout 45 $b bench model --model /tmp/qwen05 -d 0 2048 >> $o/qwen05.txt 2>>$o/log.txt; done
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-s4 gerbil gerbil-s4 gerbil; do echo "== $b" >> $o/llama8.txt; timeout 80 $b bench model --model /tmp/llama8 -r 3 -d 0 2048 >> $o/llama8.txt 2>>$o/log.txt; done
timeout 100 gerbil bench model --model /tmp/llama8 -r 1 -d 0 --profile > $o/llama8_profile.txt 2>>$o/log.txt
date >> $o/log.txt
