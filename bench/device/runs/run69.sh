#!/usr/bin/env bash
# H200 run 69 (session 9): is it DRAM channel camping? bench_dispatch_chain's block chains with each block read from a
# staggered start; gerbil-o = gerbil-m with each decode column group streaming its rows from a staggered start
# ((group * 7 mod pieces / 32) * 32 pieces, wrapping), against gerbil-m on llama3-8b decode.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-o selftest --kernel linear_fused
step 60 gerbil-o selftest --kernel linear_qkv_rope
step 170 gerbil-o synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-m gerbil-o gerbil-m gerbil-o; do step 60 $b bench model --model /tmp/llama8 -p 16 -r 3 -d 0; done
step 200 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|chain|^tg128  |passed|FAIL|rc=[^0]" $o/log.txt
