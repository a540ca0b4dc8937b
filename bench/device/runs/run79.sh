#!/usr/bin/env bash
# H200 run 79 (session 10): gerbil-x = gerbil-w with the clock check moved to after a case's inputs are made
# (run 77's LM head rows right after their weights were generated still timed 2-4x slow). The whole kernel
# table with clocks logged, then the selftest.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
w=/tmp/run79; mkdir -p $w; o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,memory.used --format=csv -lms 200 > $w/smi.csv 2>&1 &
smi=$!
echo "== $(date +%T) gerbil-x bench kernels" >> $o/log.txt
timeout 300 gerbil-x bench kernels > $w/kernels_all.txt 2>&1; echo "rc=$? $(date +%T)" >> $o/log.txt
kill $smi
echo "== $(date +%T) gerbil-x selftest" >> $o/log.txt; timeout 100 gerbil-x selftest >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt
tar czf $o/run79.tar.gz -C $w .
date >> $o/log.txt
grep -E "^==|passed|FAIL|rc=" $o/log.txt; grep -E "lm_head M=1|slow by" $w/kernels_all.txt | cut -c1-110
