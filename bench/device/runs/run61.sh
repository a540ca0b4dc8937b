#!/usr/bin/env bash
# H200 run 61 (session 8): experiment binary gerbil-k3: which prepared norms (GERBIL_PREPARE) with the plain
# epilogue's loads issued first (GERBIL_PRELOAD) and the prepared norm's raw pieces loaded first
# (GERBIL_PREFETCH_RAW). Decode only (-p 16), one round.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 170 gerbil-k3 synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step 30 gerbil-k3 synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for cfg in "GERBIL_PREPARE=none" "GERBIL_PREPARE=none GERBIL_PRELOAD=1" "GERBIL_PREPARE=mlphead" \
           "GERBIL_PREPARE=mlphead GERBIL_PRELOAD=1 GERBIL_PREFETCH_RAW=1" \
           "GERBIL_PREPARE=all GERBIL_PRELOAD=1 GERBIL_PREFETCH_RAW=1"; do
  echo "== $cfg" >> $o/log.txt
  env $cfg timeout 60 gerbil-k3 bench model --model /tmp/llama8 -p 16 -r 3 -d 0 >> $o/log.txt 2>&1
  env $cfg timeout 30 gerbil-k3 bench model --model /tmp/qwen05 -p 16 -r 5 -d 0 >> $o/log.txt 2>&1
done
date >> $o/log.txt
grep -E "^== GERBIL|^tg128  |rc=[^0]|rror" $o/log.txt | tail -60
