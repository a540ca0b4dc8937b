#!/usr/bin/env bash
# H200 run 70 (session 9): gerbil-p = gerbil-m with linear_matvec_sg's workgroups looping over units of column
# groups (gerbil-n's loop), plus experiment switches for every decode product: GERBIL_MATVEC_SPLIT / _UNROLL
# (the blocking) and GERBIL_MATVEC_WORKGROUPS (grid cap). Small units (one column group of 16 KB per
# workgroup, split 8) with a resident grid, as bench_dispatch_chain's fastest block chain (runs 67, 69).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 env GERBIL_MATVEC_SPLIT=8 GERBIL_MATVEC_UNROLL=1 GERBIL_MATVEC_WORKGROUPS=5 gerbil-p selftest --kernel linear_fused
step 170 gerbil-p synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
run() { step 60 env "$@" bench model --model /tmp/llama8 -p 16 -r 3 -d 0; }
run gerbil-m
run gerbil-p
run GERBIL_MATVEC_SPLIT=8 GERBIL_MATVEC_UNROLL=1 gerbil-p
run GERBIL_MATVEC_SPLIT=8 GERBIL_MATVEC_UNROLL=1 GERBIL_MATVEC_WORKGROUPS=1056 gerbil-p
run GERBIL_MATVEC_SPLIT=8 GERBIL_MATVEC_UNROLL=2 GERBIL_MATVEC_WORKGROUPS=1056 gerbil-p
run GERBIL_MATVEC_SPLIT=8 GERBIL_MATVEC_UNROLL=1 GERBIL_MATVEC_WORKGROUPS=2112 gerbil-p
run GERBIL_MATVEC_SPLIT=4 GERBIL_MATVEC_UNROLL=2 GERBIL_MATVEC_WORKGROUPS=1056 gerbil-p
run GERBIL_MATVEC_SPLIT=8 GERBIL_MATVEC_UNROLL=2 GERBIL_MATVEC_WORKGROUPS=528 gerbil-p
run gerbil-m
date >> $o/log.txt
grep -E "^==|^tg128  |passed|FAIL|rc=[^0]" $o/log.txt
