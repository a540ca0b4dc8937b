#!/usr/bin/env bash
# H200 run 66 (session 9): bench_dispatch_chain with block chains: 128 KB per workgroup, with and without helper
# workgroups that stream the next dispatch's first MB into L2 during the tail.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 300 bench_dispatch_chain 1
date >> $o/log.txt
grep -E "^==|chain|rc=[^0]" $o/log.txt
