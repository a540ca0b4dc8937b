#!/usr/bin/env bash
# H200 run 36 (session 4): decode attention with K / V loads issued together, its round's scores zeroed
# explicitly (run 35's version kept the previous round's partial scores: wrong on the H200), 8 keys per
# subgroup step (gerbil = gerbil-a2) or 4 (gerbil-b2), against gerbil-s3 (04f07f8).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil selftest
step 60 gerbil-b2 selftest --kernel flash_attention
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s3 gerbil-b2 gerbil; do echo "== $b" >> $o/qwen05.txt; timeout 60 $b bench model --model /tmp/qwen05 -d 0 2048 >> $o/qwen05.txt 2>>$o/log.txt; done
timeout 80 gerbil bench model --model /tmp/qwen05 -d 0 2048 -r 1 --profile > $o/qwen05_profile.txt 2>>$o/log.txt
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-s3 gerbil; do echo "== $b" >> $o/llama8.txt; timeout 100 $b bench model --model /tmp/llama8 -r 3 -d 0 2048 >> $o/llama8.txt 2>>$o/log.txt; done
date >> $o/log.txt
