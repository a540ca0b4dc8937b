#!/usr/bin/env bash
# One H200 device call (issue 20): batched decoding through the row-table kernels and the pipelined greedy batch,
# bench model --batch 1,4,16,64 (128 prompt + 128 generated tokens per sequence) on random f16 weights of
# Qwen2.5-0.5B's and Llama-3-8B's shapes, as bench/device/kv_and_batch_run.sh measured them before. Stage first
# (../shared/device/stage.sh, gerbil in .device/bin), then run it through the device tool with carry [".device"].
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
o=$OUT
date > $o/log.txt
bench() {  # NAME TIMEOUT ARGS...: one bench model run into $o/NAME.txt
  local name=$1 t=$2; shift 2
  echo "== $name: gerbil bench model $*" >> $o/log.txt
  timeout "$t" gerbil bench model "$@" > "$o/$name.txt" 2>> $o/log.txt || echo "== $name failed ($?)" >> $o/log.txt
  cat "$o/$name.txt"
}
gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05 >> $o/log.txt 2>&1
bench qwen05_batch 60 --model /tmp/qwen05 -p 128 -g 128 --batch 1,4,16,64
gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8 >> $o/log.txt 2>&1
bench llama8_batch 100 --model /tmp/llama8 -p 128 -g 128 --batch 1,4,16,64
date >> $o/log.txt
