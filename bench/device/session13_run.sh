#!/usr/bin/env bash
# One H200 device call for the thirteenth session's tables: quantized GGUF decoding and prompts (random blocks in
# Llama-3-8B's and Qwen2.5-0.5B's shapes, bench/device/random_gguf.py) beside f16 models of the same shapes in the
# same call, the per-kernel rows of the quantized products, the adapter's tuning, batched decoding through the row
# tables, and decoding at depth with an f32 and an f16 KV cache. Stage first (../shared/device/stage.sh; gerbil in
# .device/bin, Dawn in .device/lib), then run it with carry [".device"]. Steps are ordered by priority, each under
# its own timeout, so a call cut short still returns the first tables.
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
o=$OUT
export GERBIL_CACHE_DIR=/tmp/gerbil-cache
log() { echo "== $(date +%T) $*" >> $o/log.txt; }
step() {  # NAME TIMEOUT COMMAND...: output into $o/NAME.txt
  local name=$1 t=$2; shift 2
  log "$name: $*"
  timeout "$t" "$@" > "$o/$name.txt" 2>&1 || log "$name failed ($?)"
}
date > $o/log.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $o/log.txt
step tune 60 gerbil tune
step synth_qwen05 60 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
# The first token of a fresh process: with no cache at all (Dawn's and the driver's off), then filling gerbil's
# cache folder, then reading it.
step first_token_nocache 60 env GERBIL_CACHE_DIR=off __GL_SHADER_DISK_CACHE=0 \
  gerbil bench model --model /tmp/qwen05 -p 16 -g 16 -d 0 -r 1
for run in fill read; do
  step first_token_cache_$run 60 env GERBIL_CACHE_DIR=/tmp/first-token-cache __GL_SHADER_DISK_CACHE=0 \
    gerbil bench model --model /tmp/qwen05 -p 16 -g 16 -d 0 -r 1
done
for q in Q4_0 Q4_K_M; do
  step gguf_llama8_$q 90 python3 bench/device/random_gguf.py llama3-8b $q /tmp/llama8-$q.gguf
  step llama8_$q 120 gerbil bench model --model /tmp/llama8-$q.gguf -p 512 -g 128 -d 0 -r 3
done
step kernels_linear 90 gerbil bench kernels --kernel linear --shape llama
for q in Q8_0 Q4_K_M; do
  step gguf_qwen05_$q 60 python3 bench/device/random_gguf.py qwen2.5-0.5b $q /tmp/qwen05-$q.gguf
  step qwen05_$q 60 gerbil bench model --model /tmp/qwen05-$q.gguf -p 512 -g 128 -d 0 -r 3
done
step qwen05_f16 60 gerbil bench model --model /tmp/qwen05 -p 512 -g 128 -d 0 -r 3
step qwen05_batch 90 gerbil bench model --model /tmp/qwen05 -p 128 -g 128 --batch 1,4,8,16,32,64
step synth_llama8 120 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step llama8_f16 120 gerbil bench model --model /tmp/llama8 -p 512 -g 128 -d 0 -r 3
step llama8_batch 150 gerbil bench model --model /tmp/llama8 -p 128 -g 128 --batch 1,4,8,16,32,64
for kv in f32 f16; do
  step llama8_depth_$kv 120 gerbil bench model --model /tmp/llama8 -p 8192 -g 128 -d 8192 -r 2 --ctx 8448 --kv-cache $kv
  step qwen05_depth_$kv 90 gerbil bench model --model /tmp/qwen05 -p 8192 -g 128 -d 8192 -r 2 --ctx 8448 --kv-cache $kv
done
log done
