#!/usr/bin/env bash
# H200 run 72 (session 9): gerbil-r = gerbil-q with the looping code only where the grid is capped below the units
# (override LOOPS; run 71 had qwen2.5-0.5b decode 2 % slower with the loop and its barrier everywhere); the
# few-whole-pairs rule, superseded, removed. Checks, then both models against gerbil-m.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil-r selftest
step 30 gerbil-r synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-m gerbil-r; do step 50 $b bench model --model /tmp/qwen05 -d 0 2048; done
step 170 gerbil-r synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-m gerbil-r; do step 100 $b bench model --model /tmp/llama8 -r 3 -d 0 2048; done
step 90 test_graph_fixtures-r
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|PASSED|FAIL|rc=[^0]" $o/log.txt | tail -40
