#!/usr/bin/env bash
# H200 run 65 (session 8): gerbil-m = gerbil-l with the plain decode epilogue's bias, residual and next-norm weight
# loaded before the loop (run 61's early loads, now the kernel's only epilogue): selftest, then llama3-8b and
# qwen2.5-0.5b decode against gerbil-l.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-m selftest
step 170 gerbil-m synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-l gerbil-m; do step 60 $b bench model --model /tmp/llama8 -p 16 -r 3 -d 0; done
step 30 gerbil-m synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-l gerbil-m; do step 30 $b bench model --model /tmp/qwen05 -p 16 -r 5 -d 0; done
date >> $o/log.txt
grep -E "^==|^tg128  |passed|FAIL|rc=[^0]" $o/log.txt
