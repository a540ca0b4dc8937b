#!/usr/bin/env bash
# H200 run 86 (session 11): gerbil-b = 4967649 (the old tile rule), gerbil-e = the tightened rule (a large tile for
# shares only where it pads M and N no more than 64-wide tiles and makes shares of 64 slabs or more).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
w=/tmp/run86; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 60 gerbil-e selftest --kernel linear
for b in b e; do out m50_$b.txt 60 gerbil-$b bench kernels --kernel linear --shape "M=50 "; out m2048_$b.txt 60 gerbil-$b bench kernels --kernel linear --shape "M=2048"; done
step 60 gerbil-e synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
for i in 1 2; do for b in b e; do out qwen_$b$i.txt 60 gerbil-$b bench model --model /tmp/qwen -r 5 -d 0 -g 16; done; done
step 100 gerbil-e synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in b e; do out llama50_$b.txt 60 gerbil-$b bench model --model /tmp/llama8 -p 50 -g 8 -r 5 -d 0; done
date >> $w/log.txt
tar czf $o/run86.tar.gz -C $w .
grep -E "^==|passed|FAIL|rc=[^0]" $w/log.txt | tail -30
for f in $w/m50_*.txt $w/m2048_*.txt; do echo "-- $f"; grep -E "split  " $f | cut -c1-150; done
for f in $w/qwen_*.txt $w/llama50_*.txt; do echo "-- $f"; grep -E "^pp" $f; done
