#!/usr/bin/env bash
# H200 run 71 (session 9): gerbil-q = the final code: linear_matvec_sg's workgroups loop over units, and rows of
# >= 8 KiB (llama3-8b's) decode one column group per workgroup, split 8, one load in flight, over at most 1,056
# workgroups (run 70's fastest setting, now the dispatcher's rule). Checks, then both models against gerbil-m.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil-q selftest
step 170 gerbil-q synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-m gerbil-q; do step 100 $b bench model --model /tmp/llama8 -r 3 -d 0 2048; done
step 30 gerbil-q synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-m gerbil-q; do step 50 $b bench model --model /tmp/qwen05 -d 0 2048; done
step 90 test_graph_fixtures-q
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|PASSED|FAIL|rc=[^0]" $o/log.txt | tail -40
