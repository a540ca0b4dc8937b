#!/usr/bin/env bash
# H200 run 37 (session 4): Llama-8B with gerbil = run 36's gerbil-b2 (4 keys per subgroup step, K / V loads
# together), then gerbil-s3 (04f07f8) once.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 30 test_graph_fixtures --gtest_brief=1
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
echo "== gerbil" >> $o/llama8.txt; timeout 100 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048 >> $o/llama8.txt 2>>$o/log.txt
echo "== gerbil-s3 -r 1" >> $o/llama8.txt; timeout 70 gerbil-s3 bench model --model /tmp/llama8 -r 1 -d 0 2048 >> $o/llama8.txt 2>>$o/log.txt
date >> $o/log.txt
