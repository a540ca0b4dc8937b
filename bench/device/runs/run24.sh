#!/usr/bin/env bash
# H200 run 24 (session 3): correctness of this session's binary, then gerbil (new decode blocking and prompt
# split rules) against the previous session's last binary (gerbil-s2) and transformers, same models.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil selftest
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 2048 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 30 gerbil-s2 bench model --model /tmp/qwen05 -d 0 > $o/qwen05_s2.txt 2>>$o/log.txt
timeout 100 python3 bench/peers/transformers_bench.py --model /tmp/qwen05 > $o/qwen05_transformers.json 2>>$o/log.txt
step 160 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 80 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 50 gerbil-s2 bench model --model /tmp/llama8 -r 3 -d 0 > $o/llama8_s2.txt 2>>$o/log.txt
date >> $o/log.txt
