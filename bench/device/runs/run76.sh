#!/usr/bin/env bash
# H200 run 76 (session 10): gerbil-u = gerbil-t + bench kernels waiting before each case until a 64 MiB copy
# probe is back to its speed at the start (settling), and the decode kernel's looping path with its shares
# double-buffered in workgroup memory (one barrier per unit instead of two). Checks, llama3-8b decode against
# gerbil-t (alternated), then the whole kernel table with clocks and memory logged.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
w=/tmp/run76; mkdir -p $w; o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $(date +%T) $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 120 gerbil-u selftest
step 60 gerbil-u synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-t gerbil-u gerbil-t gerbil-u; do step 60 $b bench model --model /tmp/llama8 -p 16 -r 3 -d 0; done
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,memory.used --format=csv -lms 200 > $w/smi.csv 2>&1 &
smi=$!
echo "== $(date +%T) gerbil-u bench kernels" >> $o/log.txt
timeout 330 gerbil-u bench kernels > $w/kernels_all.txt 2>&1; echo "rc=$? $(date +%T)" >> $o/log.txt
kill $smi
tar czf $o/run76.tar.gz -C $w .
date >> $o/log.txt
grep -E "^==|^tg128  |passed|FAIL|rc=[^0]" $o/log.txt | tail -30
