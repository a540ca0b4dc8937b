#!/usr/bin/env bash
# H200 run 50 (session 6): gerbil-c = the committed code (gerbil-s6, 4316470) with split parts of the prompt
# kernel looping over the slab's k again (whole tiles keep it written out).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil-c selftest
step 60 gerbil-c bench kernels --kernel linear --shape "M=512" --iterations 30
step 60 gerbil-s6 bench kernels --kernel linear --shape "M=512" --iterations 30
step 170 gerbil-c synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-s6 gerbil-c; do step 50 $b bench model --model /tmp/llama8 -r 3 -d 0; done
step 30 gerbil-c synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s6 gerbil-c gerbil-s6 gerbil-c; do step 30 $b bench model --model /tmp/qwen05 -d 0; done
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|rc=[^0]" $o/log.txt | tail -30
