#!/usr/bin/env bash
# The seventeenth session's second H200 call: batched decoding of Llama-3-8B-shaped Q4_0 and Q4_K_M files (random
# blocks from bench/device/random_gguf.py), gerbil-base against gerbil-cand, interleaved; then gerbil-cand's
# decode rows of Qwen2.5-0.5B's shape at depths 0, 2,048, 8,192 and 32,768, and the context and KV cache a model
# gets by default (`gerbil generate`'s load line) for that model and for a Llama-3-8B-shaped file.
#   bench/device/session17_quant_batch.sh DIR   (DIR holds gerbil-base and gerbil-cand)
source "$(dirname "$0")/common.sh"
dir=$(realpath "$1")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/l8.gguf
python3 bench/device/random_gguf.py llama3-8b Q4_K_M /tmp/l8k.gguf &
binaries=("$dir/gerbil-base" "$dir/gerbil-cand")
for file in /tmp/l8.gguf /tmp/l8k.gguf; do
  wait
  each "$file batched" bench model --model "$file" -p 128 -g 128 --batch 1,2,4,8,16
done
"$dir/gerbil-cand" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
section "0.5B decode at depth: cand"
timeout 200 "$dir/gerbil-cand" bench model --model /tmp/q05 -p 16 -g 128 -d 0 2048 8192 32768 -r 2 --ctx 33024 | rows
for model in /tmp/q05 /tmp/l8k.gguf; do
  section "default context: $model"
  timeout 100 "$dir/gerbil-cand" generate --model "$model" -n 4 --stats --tokens 1,2,3 2>&1 | grep -E "^loaded|tok/s"
done
section done
