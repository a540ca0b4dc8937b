#!/usr/bin/env bash
# H200 run 84 (session 11): gerbil-b = the final code so far (4967649), gerbil-c = b with the prompt tile rule
# also taking a large tile when its (tile, slab) iterations fill a wave of 264 shares of 32 slabs (Qwen's down
# projection at M = 512: 28 tiles of 128 x 128 shared out, instead of 112 of 64 x 64).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
w=/tmp/run84; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 60 gerbil-c selftest --kernel linear
for b in b c; do out prefill_$b.txt 200 gerbil-$b bench kernels --kernel linear --shape "qwen"; done
step 100 gerbil-c synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
for i in 1 2 3; do for b in b c; do out qwen_$b$i.txt 100 gerbil-$b bench model --model /tmp/qwen -r 5 -d 0 -g 16; done; done
step 170 gerbil-c synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in b c; do out llama_$b.txt 120 gerbil-$b bench model --model /tmp/llama8 -r 3 -d 0 -g 16; done
date >> $w/log.txt
tar czf $o/run84.tar.gz -C $w .
grep -E "^==|passed|FAIL|rc=[^0]" $w/log.txt | tail -30
for f in $w/prefill_*.txt; do echo "-- $f"; grep -E "^ceil|split  |tiled  " $f | grep -E "M=512|M=2048|ceil" | cut -c1-150; done
for f in $w/qwen_*.txt $w/llama_*.txt; do echo "-- $f"; grep -E "pp512" $f; done
