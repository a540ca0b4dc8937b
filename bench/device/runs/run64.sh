#!/usr/bin/env bash
# H200 run 64 (session 8): bench_dispatch_chain with both sets of read buffers made before any is timed (run 63's
# one-dispatch-per-layer chain, made after the first set was freed, read at ~1 TB/s), caps included.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-l bench kernels --kernel linear --shape "llama o M=1" --iterations 20
step 120 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|chain|ceilings|rc=[^0]" $o/log.txt
