#!/usr/bin/env bash
# H200 run 85 (session 11): gerbil-d = the final code (the prompt tile rule of run 84's gerbil-c, committed);
# gerbil-b = run 83's final for the same-call before/after. Checks, the qwen prompt products, both models.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
w=/tmp/run85; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 120 gerbil-d selftest
step 120 test_graph_fixtures-d --gtest_brief=1
out prefill_d.txt 100 gerbil-d bench kernels --kernel linear --shape "M=512"
step 100 gerbil-d synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
for i in 1 2; do for b in b d; do out qwen_$b$i.txt 100 gerbil-$b bench model --model /tmp/qwen -d 0; done; done
out qwen_d.txt 100 gerbil-d bench model --model /tmp/qwen -d 0 2048
step 170 gerbil-d synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
out llama_d.txt 150 gerbil-d bench model --model /tmp/llama8 -r 3 -d 0 2048
date >> $w/log.txt
tar czf $o/run85.tar.gz -C $w .
grep -E "^==|passed|PASSED|FAIL|SKIP|rc=[^0]" $w/log.txt | tail -30
grep -E "^ceil|split  " $w/prefill_d.txt | cut -c1-150
for f in $w/qwen_*.txt $w/llama_*.txt; do echo "-- $f"; grep -E "pp512|tg128  |first" $f; done
