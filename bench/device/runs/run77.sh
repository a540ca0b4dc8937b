#!/usr/bin/env bash
# H200 run 77 (session 10): gerbil-v = gerbil-s's kernels (a comment changed) + bench kernels' floor, Llama-3-8B
# sizes for the token kernels, and, before each case, loading the GPU until a 64 MiB copy probe is back to its
# speed at the start (run 76 found the slow stretches of the whole-table runs were the SM clock fallen to
# 345 MHz after the host's long table generation). The whole kernel table with clocks logged; qwen2.5-0.5b.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
w=/tmp/run77; mkdir -p $w; o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil-v selftest
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,memory.used --format=csv -lms 200 > $w/smi.csv 2>&1 &
smi=$!
echo "== $(date +%T) gerbil-v bench kernels" >> $o/log.txt
timeout 300 gerbil-v bench kernels > $w/kernels_all.txt 2>&1; echo "rc=$? $(date +%T)" >> $o/log.txt
kill $smi
step 30 gerbil-v synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
step 60 gerbil-v bench model --model /tmp/qwen05 -d 0 2048
tar czf $o/run77.tar.gz -C $w .
date >> $o/log.txt
grep -E "^==|^tg128  |^pp512|passed|FAIL|rc=[^0]" $o/log.txt | tail -30
