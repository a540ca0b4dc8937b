#!/usr/bin/env bash
# H200 run 60 (session 8): which prepared norms pay (experiment binary gerbil-k2, GERBIL_PREPARE selects):
# none, all, only down -> q|k|v, only o -> gate|up, all but the LM head's. Decode only (-p 16).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 170 gerbil-k2 synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step 30 gerbil-k2 synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for round in 1 2; do
  for v in none all qkv mlp nohead; do
    echo "== GERBIL_PREPARE=$v" >> $o/log.txt
    GERBIL_PREPARE=$v step 60 gerbil-k2 bench model --model /tmp/llama8 -p 16 -r 3 -d 0
    GERBIL_PREPARE=$v step 30 gerbil-k2 bench model --model /tmp/qwen05 -p 16 -r 5 -d 0
  done
done
date >> $o/log.txt
grep -E "^== GERBIL|^tg128  |rc=[^0]" $o/log.txt | tail -60
