#!/usr/bin/env bash
# One H200 device call: the KV cache in f32 against f16 at depths 0, 2,048 and 8,192 (same binary, same call),
# and batched decoding at 1, 4, 16 and 64 sequences of 128 prompt + 128 generated tokens (bench model --batch,
# like llama-batched-bench), on random f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes. Stage first
# (../shared/device/stage.sh, gerbil in .device/bin, Dawn in .device/lib), then run it through the device tool
# with carry [".device"].
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
o=$OUT
log() { echo "== $*" >> $o/log.txt; }
date > $o/log.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $o/log.txt
gerbil info >> $o/log.txt 2>&1
bench() {  # NAME TIMEOUT ARGS...: one bench model run into $o/NAME.txt
  local name=$1 t=$2; shift 2
  log "$name: gerbil bench model $*"
  timeout "$t" gerbil bench model "$@" > "$o/$name.txt" 2>> $o/log.txt || log "$name failed ($?)"
}
gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05 >> $o/log.txt 2>&1
for kv in f32 f16; do bench qwen05_kv_$kv 120 --model /tmp/qwen05 -r 3 -d 0 2048 8192 --ctx 8448 --kv-cache $kv; done
bench qwen05_batch 150 --model /tmp/qwen05 -p 128 -g 128 --batch 1,4,16,64
gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8 >> $o/log.txt 2>&1
for kv in f32 f16; do bench llama8_kv_$kv 150 --model /tmp/llama8 -r 3 -d 0 8192 --ctx 8448 --kv-cache $kv; done
bench llama8_batch 150 --model /tmp/llama8 -p 128 -g 128 --batch 1,4,16,64
date >> $o/log.txt
