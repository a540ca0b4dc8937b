#!/usr/bin/env bash
# H200 run 40 (session 5): L2 prefetch of the next products' weights by the decode attention's extra
# workgroups (--l2-prefetch MIB), swept on qwen2.5-0.5b and llama3-8b; 0 is the baseline, same binary.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 40 gerbil selftest --kernel flash_attention
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for p in 0 32; do step 20 gerbil generate --model /tmp/qwen05 --tokens 1,2,3,4,5 -n 64 --seed 7 --l2-prefetch $p; done
for p in 0 8 16 32 48 0; do echo "== l2-prefetch $p" >> $o/qwen05.txt; timeout 45 gerbil bench model --model /tmp/qwen05 -d 0 2048 --l2-prefetch $p >> $o/qwen05.txt 2>>$o/log.txt; done
date >> $o/log.txt
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for p in 0 32 48 24; do echo "== l2-prefetch $p" >> $o/llama8.txt; timeout 80 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048 --l2-prefetch $p >> $o/llama8.txt 2>>$o/log.txt; done
date >> $o/log.txt
