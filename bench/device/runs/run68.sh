#!/usr/bin/env bash
# H200 run 68 (session 9): gerbil-n = gerbil-m with linear_matvec_sg's workgroups looping over units of column
# groups (w, w + G, ...), the grid capped by GERBIL_MATVEC_WORKGROUPS (experiment): llama3-8b decode per cap.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-n selftest --kernel linear_fused
step 60 env GERBIL_MATVEC_WORKGROUPS=5 gerbil-n selftest --kernel linear_fused
step 170 gerbil-n synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step 60 gerbil-m bench model --model /tmp/llama8 -p 16 -r 3 -d 0
for cap in 0 264 528 1056 2112; do
  echo "cap $cap" >> $o/log.txt
  step 60 env GERBIL_MATVEC_WORKGROUPS=$cap gerbil-n bench model --model /tmp/llama8 -p 16 -r 3 -d 0
done
step 60 gerbil-m bench model --model /tmp/llama8 -p 16 -r 3 -d 0
date >> $o/log.txt
grep -E "^==|^cap|^tg128  |passed|FAIL|rc=[^0]" $o/log.txt
