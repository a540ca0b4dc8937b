#!/usr/bin/env bash
# H200 run 59 (session 8): gerbil-k = gerbil-j plus prepared norms (o and down write x * the next RMSNorm's
# weight; q|k|v, gate|up and the LM head read it and take the rms from the raw x once per workgroup).
# Checks, then llama3-8b and qwen2.5-0.5b against gerbil-j, the decode products alone, and the dispatch chains.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-k selftest --kernel linear_fused
step 60 gerbil-k selftest --kernel linear_qkv_rope
step 90 test_graph_fixtures-k
step 170 gerbil-k synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-j gerbil-k; do step 100 $b bench model --model /tmp/llama8 -r 3 -d 0 2048; done
step 30 gerbil-k synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-j gerbil-k; do step 50 $b bench model --model /tmp/qwen05 -d 0 2048; done
step 60 gerbil-k bench kernels --kernel linear --shape "llama gate_up M=1" --iterations 30
step 60 gerbil-k bench kernels --kernel linear --shape "llama qkv M=1" --iterations 30
step 60 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |PASS|FAIL|PASSED|rc=[^0]|norm|prepared|gated|chain" $o/log.txt | tail -60
