#!/usr/bin/env bash
# H200 run 63 (session 8): bench_dispatch_chain with the read chain's dispatches capped at 264 / 1,056 / 2,112 /
# 4,224 workgroups (threads loop over the rest): does a grid of about one wave take time out of each boundary?
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-l bench kernels --kernel linear --shape "llama o M=1" --iterations 20
step 120 bench_dispatch_chain 1
step 120 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|chain|ceilings|rc=[^0]" $o/log.txt
