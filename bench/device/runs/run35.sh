#!/usr/bin/env bash
# H200 run 35 (session 4): decode attention with 8 keys per subgroup step and K / V loads issued together,
# against gerbil-s3 (04f07f8): kernels, both models at depth 0 and 2048.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil selftest --kernel flash_attention
step 60 test_graph_fixtures --gtest_brief=1
timeout 60 gerbil-s3 bench kernels --kernel attention > $o/kernels_attention_s3.txt 2>&1
timeout 60 gerbil bench kernels --kernel attention > $o/kernels_attention.txt 2>&1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil-s3 bench model --model /tmp/qwen05 -d 0 2048 > $o/qwen05_s3.txt 2>>$o/log.txt
timeout 80 gerbil bench model --model /tmp/qwen05 -d 0 2048 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 100 gerbil-s3 bench model --model /tmp/llama8 -r 3 -d 0 2048 > $o/llama8_s3.txt 2>>$o/log.txt
timeout 150 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
date >> $o/log.txt
