#!/usr/bin/env bash
# H200 run 81 (session 11): gerbil-x = session 10's final code (4f60bd3), gerbil-z = this session's so far plus
# two changes: the tiled prompt kernel's 16-bit weights decoded by all 256 threads (two per row, 4 k each; were
# 128 threads decoding 8), and embed_vec4.wgsl (4 outputs per thread where D % 4 == 0).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
w=/tmp/run81; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 120 gerbil-z selftest
step 120 test_graph_fixtures-z --gtest_brief=1
for b in x z; do out embed_$b.txt 120 gerbil-$b bench kernels --kernel embedding; done
for b in x z; do out prefill_$b.txt 200 gerbil-$b bench kernels --kernel linear --shape "M=512"; done
step 170 gerbil-z synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in x z; do out llama_$b.txt 120 gerbil-$b bench model --model /tmp/llama8 -r 3 -d 0; done
step 100 gerbil-z synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
for b in x z; do out qwen_$b.txt 100 gerbil-$b bench model --model /tmp/qwen -r 3 -d 0; done
date >> $w/log.txt
tar czf $o/run81.tar.gz -C $w .
grep -E "^==|passed|PASSED|FAIL|SKIP|rc=[^0]" $w/log.txt | tail -40
for f in $w/embed_*.txt; do echo "-- $f"; grep -E "^ceil|^floor|T=2048" $f | cut -c1-150; done
for f in $w/prefill_*.txt; do echo "-- $f"; grep -E "^ceil|tiled" $f | cut -c1-150; done
for f in $w/llama_*.txt $w/qwen_*.txt; do echo "-- $f"; grep -E "pp512|tg128  " $f; done
