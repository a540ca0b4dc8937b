#!/usr/bin/env bash
# H200 run 30 (session 3, final kernels): correctness after NaN handling by bits and the no-token id.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil selftest -v
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
date >> $o/log.txt
