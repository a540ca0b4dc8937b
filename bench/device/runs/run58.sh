#!/usr/bin/env bash
# H200 run 58 (session 8): what a decode step's structure costs apart from the kernels (bench_dispatch_chain):
# chains of dependent dispatches in one pass, empty and streaming Llama-3-8B's projection sizes.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $o/log.txt
step 200 bench_dispatch_chain 1
step 100 gerbil-j bench kernels --kernel linear --shape "llama o M=1" --iterations 30
date >> $o/log.txt
cat $o/log.txt
