#!/usr/bin/env bash
# H200 run 83 (session 11): gerbil-b = this session's final code; gerbil-x = session 10's final (4f60bd3) for
# the same-call before/after of the model numbers. Checks, the whole kernel table (clocks logged), the models.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
w=/tmp/run83; mkdir -p $w; o=$OUT; date > $w/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $w/log.txt; timeout $t "$@" >> $w/log.txt 2>&1; echo "rc=$?" >> $w/log.txt; }
out() { local f=$1 t=$2; shift 2; echo "== $(date +%T) $* > $f" >> $w/log.txt; timeout $t "$@" > $w/$f 2>&1; echo "rc=$?" >> $w/log.txt; }
step 120 gerbil-b selftest
step 120 test_graph_fixtures-b --gtest_brief=1
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,memory.used --format=csv -lms 200 > $w/smi.csv 2>&1 &
smi=$!
out kernels.txt 240 gerbil-b bench kernels
kill $smi
step 170 gerbil-b synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
out llama_x.txt 100 gerbil-x bench model --model /tmp/llama8 -r 3 -d 0
out llama_b.txt 150 gerbil-b bench model --model /tmp/llama8 -r 3 -d 0 2048
step 100 gerbil-b synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen
out qwen_x.txt 100 gerbil-x bench model --model /tmp/qwen -d 0
out qwen_b.txt 100 gerbil-b bench model --model /tmp/qwen -d 0 2048
date >> $w/log.txt
tar czf $o/run83.tar.gz -C $w .
grep -E "^==|passed|PASSED|FAIL|SKIP|rc=[^0]" $w/log.txt | tail -40
grep -E "^ceil|^floor|slow by" $w/kernels.txt | cut -c1-150
for f in $w/llama_*.txt $w/qwen_*.txt; do echo "-- $f"; grep -E "pp512|tg128|first" $f; done
