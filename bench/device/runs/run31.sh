#!/usr/bin/env bash
# H200 run 31 (session 4): correctness of the slab-16 prompt kernel, two-pair gate|up groups and the penalised
# sampler; prompt products before/after (gerbil-s3 = 04f07f8); gate|up blockings; qwen2.5-0.5b before/after.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil selftest
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
timeout 80 gerbil-s3 bench kernels --kernel linear --shape "M=512" > $o/kernels_prefill_s3.txt 2>&1
timeout 80 gerbil bench kernels --kernel linear --shape "M=512" > $o/kernels_prefill.txt 2>&1
timeout 80 gerbil bench kernels --kernel linear --shape "llama gate_up M=1 " --blocking 2,1,1 --blocking 2,1,2 \
  --blocking 4,1,1 --blocking 4,1,2 --blocking 4,2,1 --blocking 4,2,2 --blocking 4,2,4 > $o/kernels_gate_up.txt 2>&1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil-s3 bench model --model /tmp/qwen05 -d 0 > $o/qwen05_s3.txt 2>>$o/log.txt
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 > $o/qwen05_gerbil.txt 2>>$o/log.txt
date >> $o/log.txt
