#!/usr/bin/env bash
# H200 run 14: prompt products split along K (linear_split_k) against run 9's binary; transformers beside
# gerbil for qwen2.5-0.5b; SM clocks sampled while the kernel table runs.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
step 40 gerbil selftest --kernel linear
step 40 test_graph_fixtures --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil bench model --model /tmp/qwen05 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 30 gerbil-run9 bench model --model /tmp/qwen05 -d 0 -g 16 > $o/qwen05_run9.txt 2>>$o/log.txt
timeout 100 python3 bench/peers/transformers_bench.py --model /tmp/qwen05 > $o/qwen05_transformers.json 2>>$o/log.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv -lms 250 > $o/clocks.csv &
timeout 90 gerbil bench kernels --kernel linear --shape "M=512" > $o/kernels_prefill.txt 2>&1
kill %1
step 160 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 60 gerbil bench model --model /tmp/llama8 -r 3 -d 0 -g 16 > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 60 gerbil-run9 bench model --model /tmp/llama8 -r 3 -d 0 -g 16 > $o/llama8_run9.txt 2>>$o/log.txt
date >> $o/log.txt
