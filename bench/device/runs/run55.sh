#!/usr/bin/env bash
# H200 run 55 (session 7): decode blockings of Llama-8B's products in the model. gerbil-h = gerbil-g plus a
# temporary GERBIL_EXPERIMENT_BLOCKING="K,N,split,unroll" override of linear_matvec_blocking.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 170 gerbil-h synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for e in "" "4096,6144,2,1" "4096,6144,4,1" "4096,4096,4,1" "14336,4096,4,1" "4096,28672,2,1" "4096,6144,1,2" ""; do
  echo "## GERBIL_EXPERIMENT_BLOCKING=$e" >> $o/log.txt
  GERBIL_EXPERIMENT_BLOCKING="$e" step 50 gerbil-h bench model --model /tmp/llama8 -r 2 -d 0
done
date >> $o/log.txt
grep -E "^##|^tg128  |rc=[^0]" $o/log.txt | tail -40
