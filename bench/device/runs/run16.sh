#!/usr/bin/env bash
# H200 run 16: the FMA ceiling with its chains as named variables (gerbil) against the array form (gerbil-run9).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw --format=csv -lms 100 > $o/clocks.csv &
for i in 1 2; do
  timeout 40 gerbil bench kernels --kernel rmsnorm --shape "T=1" >> $o/fma.txt 2>&1
  timeout 40 gerbil-run9 bench kernels --kernel rmsnorm --quick >> $o/fma_run9.txt 2>&1
done
kill %1
date >> $o/log.txt
