#!/usr/bin/env bash
# H200 run 56 (session 7): gerbil-i = the final code (gerbil-g plus Llama's few q|k|v pairs split over two
# subgroups in decoding) against gerbil-g: selftest, llama3-8b and qwen2.5-0.5b at depths 0 and 2048.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil-i selftest
step 170 gerbil-i synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-g gerbil-i; do step 90 $b bench model --model /tmp/llama8 -r 3 -d 0 2048; done
step 30 gerbil-i synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-g gerbil-i; do step 40 $b bench model --model /tmp/qwen05 -d 0 2048; done
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|rc=[^0]" $o/log.txt | tail -30
