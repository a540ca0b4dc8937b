#!/usr/bin/env bash
# H200 run 82 (session 11): gerbil-z = run 81's (balanced 16-bit staging, embed_vec4), gerbil-a = z with the
# tiled prompt kernel loading each slab two slabs ahead of its products (LOOKAHEAD 2, every tile size).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
w=/tmp/run82; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 60 gerbil-a selftest --kernel linear
for b in z a; do out prefill_$b.txt 200 gerbil-$b bench kernels --kernel linear --shape "M=512"; done
step 170 gerbil-a synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for i in 1 2; do for b in z a; do out llama_$b$i.txt 120 gerbil-$b bench model --model /tmp/llama8 -r 3 -d 0 -g 16; done; done
step 100 gerbil-a synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
for i in 1 2; do for b in z a; do out qwen_$b$i.txt 100 gerbil-$b bench model --model /tmp/qwen -r 5 -d 0 -g 16; done; done
date >> $w/log.txt
tar czf $o/run82.tar.gz -C $w .
grep -E "^==|passed|PASSED|FAIL|SKIP|rc=[^0]" $w/log.txt | tail -40
for f in $w/prefill_*.txt; do echo "-- $f"; grep -E "^ceil|tiled" $f | grep -v f16-arith | cut -c1-150; done
for f in $w/llama_*.txt $w/qwen_*.txt; do echo "-- $f"; grep -E "pp512" $f; done
