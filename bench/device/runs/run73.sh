#!/usr/bin/env bash
# H200 run 73 (session 10): gerbil-s = HEAD 1e145d0 (session 9's final, with the review commits after run 72).
# Checks on the H200, the whole kernel table with the current code (decode rows with the resident blocking), and
# llama3-8b decode in the same call as the copy ceiling (for the roofline ratio).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil-s selftest
step 90 test_graph_fixtures-s --gtest_brief=1
echo "== $(date +%T) gerbil-s bench kernels" >> $o/log.txt
timeout 300 gerbil-s bench kernels > $o/kernels_all.txt 2>&1; echo "rc=$?" >> $o/log.txt
step 170 gerbil-s synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step 60 gerbil-s bench model --model /tmp/llama8 -r 3 -d 0
step 40 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|^tg128  |passed|PASSED|FAIL|rc=[^0]" $o/log.txt | tail -40
