#!/usr/bin/env bash
# H200 run 12: correctness of every kernel and model path; decode-shape kernel table (linear, attention).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $o/log.txt
step 30 gerbil info
step 120 gerbil selftest
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
timeout 150 gerbil bench kernels --kernel linear --shape "M=1 " > $o/kernels_linear_decode.txt 2>&1
timeout 60 gerbil bench kernels --kernel flash_attention --shape decode > $o/kernels_attention_decode.txt 2>&1
timeout 60 gerbil bench kernels --kernel linear --shape "llama qkv M=512" > $o/kernels_llama_prefill.txt 2>&1
date >> $o/log.txt
