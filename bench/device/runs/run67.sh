#!/usr/bin/env bash
# H200 run 67 (session 9): bench_dispatch_chain with block chains: 128 KB or 16 KB contiguous per workgroup, one
# workgroup per block or a capped grid sliding over the blocks (run 66: helpers prefetching into L2 were slower).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 300 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|chain|rc=[^0]" $o/log.txt
