#!/usr/bin/env bash
# H200 run 62 (session 8): gerbil-l = the final code (prepared norms for gate|up and the LM head at hidden size
# >= 4096; never for q|k|v) against gerbil-j (session 7's final kernels): checks, then llama3-8b and
# qwen2.5-0.5b at depths 0 and 2048.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil-l selftest
step 90 test_graph_fixtures-l
step 90 test_kernels_model-l
step 170 gerbil-l synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-j gerbil-l; do step 100 $b bench model --model /tmp/llama8 -r 3 -d 0 2048; done
step 30 gerbil-l synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-j gerbil-l; do step 50 $b bench model --model /tmp/qwen05 -d 0 2048; done
step 60 gerbil-l bench model --model /tmp/llama8 -r 3 -p 16 -d 0 --prepared-norms never
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|PASSED|FAIL|rc=[^0]" $o/log.txt | tail -40
