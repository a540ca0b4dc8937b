#!/usr/bin/env bash
# H200 run 80 (session 11): gerbil-x = session 10's final code (4f60bd3), gerbil-y = this session's: the tiled
# prompt kernel's body shared with an f16-arithmetic twin (the f32 one must time as before), layernorm_welford
# combining its threads' statistics by two sums (was 31 chained merges), rmsnorm_vec4's sum moved to an include.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
w=/tmp/run80; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 120 gerbil-y selftest
step 120 test_graph_fixtures-y --gtest_brief=1
for b in x y; do out norms_$b.txt 120 gerbil-$b bench kernels --kernel layernorm --shape llama; done
for b in x y; do out rms_$b.txt 120 gerbil-$b bench kernels --kernel rmsnorm --shape llama; done
for b in x y; do out prefill_$b.txt 150 gerbil-$b bench kernels --kernel linear --shape "M=512 K=4096"; done
step 170 gerbil-y synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in x y; do out llama_$b.txt 120 gerbil-$b bench model --model /tmp/llama8 -r 3 -d 0; done
step 100 gerbil-y synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
for b in x y; do out qwen_$b.txt 100 gerbil-$b bench model --model /tmp/qwen -r 3 -d 0; done
date >> $w/log.txt
tar czf $o/run80.tar.gz -C $w .
grep -E "^==|passed|PASSED|FAIL|SKIP|rc=[^0]" $w/log.txt | tail -40
for f in $w/norms_*.txt $w/rms_*.txt; do echo "-- $f"; grep -E "^ceil|llama" $f | cut -c1-140; done
for f in $w/prefill_*.txt; do echo "-- $f"; grep -E "^ceil|tiled" $f | cut -c1-150; done
for f in $w/llama_*.txt $w/qwen_*.txt; do echo "-- $f"; grep -E "pp512|tg128" $f; done
