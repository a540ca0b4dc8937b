#!/usr/bin/env bash
# H200 run 44 (session 5): the committed code (69ec116, which includes 9996d3c) checked on the H200: every kernel check and
# the GPU test binaries.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil selftest
step 40 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
step 40 test_generate_gpu_sampling --gtest_brief=1
step 40 test_kernels_seed --gtest_brief=1
step 30 test_gpu --gtest_brief=1
date >> $o/log.txt
