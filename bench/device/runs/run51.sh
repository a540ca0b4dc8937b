#!/usr/bin/env bash
# H200 run 51 (session 6): gerbil-c (run 50's: whole tiles written out, split parts looped) against gerbil-d (the
# slab looped over everywhere, same [buffer][k][slot] arrays).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 40 gerbil-d bench kernels --kernel linear --shape "M=512" --split-parts 1 --iterations 20
step 40 gerbil-c bench kernels --kernel linear --shape "M=512" --split-parts 1 --iterations 20
step 120 gerbil-c synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-c gerbil-d; do step 40 $b bench model --model /tmp/llama8 -r 3 -d 0; done
date >> $o/log.txt
grep -E "^==|^pp512|rc=[^0]" $o/log.txt | tail -12
