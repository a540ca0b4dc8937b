#!/usr/bin/env bash
# H200 run 43 (session 5): run 42's prepared norms with the consumer's partial sums loaded 8 at a time
# after the dot products (vec4s) and the producer's bias / residual / norm weight loaded before them;
# gerbil-s4 = 69ec116 (before).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 30 gerbil selftest --kernel linear_prepared_norm
step 40 test_graph_fixtures --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s4 gerbil; do echo "== $b" >> $o/qwen05.txt; timeout 45 $b bench model --model /tmp/qwen05 -d 0 2048 >> $o/qwen05.txt 2>>$o/log.txt; done
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil gerbil-s4 gerbil; do echo "== $b" >> $o/llama8.txt; timeout 80 $b bench model --model /tmp/llama8 -r 3 -d 0 2048 >> $o/llama8.txt 2>>$o/log.txt; done
date >> $o/log.txt
