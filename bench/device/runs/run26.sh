#!/usr/bin/env bash
# H200 run 26 (session 3, final commit): correctness, the decode kernel table with cold weights, Qwen.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil selftest
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
timeout 90 gerbil bench kernels --kernel linear --shape "M=1 " > $o/kernels_decode.txt 2>&1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 > $o/qwen05_gerbil.txt 2>>$o/log.txt
date >> $o/log.txt
