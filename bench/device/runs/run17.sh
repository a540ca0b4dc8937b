#!/usr/bin/env bash
# H200 run 17: correctness after the review fixes (shared chunk_keys, split-K and fusion checks).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
step 100 gerbil selftest
step 40 test_graph_fixtures --gtest_brief=1
step 40 test_kernels_model --gtest_brief=1
date >> $o/log.txt
