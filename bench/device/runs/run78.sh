#!/usr/bin/env bash
# H200 run 78 (session 10): gerbil-w = gerbil-v + gated_act_vec4 (a vec4 per thread where I % 4 == 0).
# Checks, then the gated_act rows of gerbil-v and gerbil-w, twice each, alternated.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
w=/tmp/run78; mkdir -p $w; o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-w selftest --kernel gated_act
step 90 test_graph_fixtures-w --gtest_brief=1
for b in gerbil-v gerbil-w gerbil-v gerbil-w; do step 60 $b bench kernels --kernel gated_act; done
date >> $o/log.txt
grep -E "^==|gated_act  |passed|PASSED|FAIL|rc=[^0]" $o/log.txt | cut -c1-120
