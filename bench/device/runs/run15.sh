#!/usr/bin/env bash
# H200 run 15 (final): the unsplit tiled kernel folded back to its pre-split form; prefill beside run 9's
# binary and transformers (qwen2.5-0.5b), and llama3-8b beside run 9's binary.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
step 30 gerbil selftest --kernel linear
step 30 test_graph_fixtures --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 45 gerbil bench model --model /tmp/qwen05 -d 0 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 25 gerbil-run9 bench model --model /tmp/qwen05 -d 0 -g 16 > $o/qwen05_run9.txt 2>>$o/log.txt
timeout 100 python3 bench/peers/transformers_bench.py --model /tmp/qwen05 > $o/qwen05_transformers.json 2>>$o/log.txt
timeout 50 gerbil bench kernels --kernel linear --shape "M=512" > $o/kernels_prefill.txt 2>&1
step 160 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 50 gerbil bench model --model /tmp/llama8 -r 3 -d 0 -g 16 > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 45 gerbil-run9 bench model --model /tmp/llama8 -r 3 -d 0 -g 8 > $o/llama8_run9.txt 2>>$o/log.txt
date >> $o/log.txt
