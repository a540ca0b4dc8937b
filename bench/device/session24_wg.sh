#!/usr/bin/env bash
# The twenty-fourth session's third H200 call: flash_attention_sg in workgroups of 128 threads (gerbil-wg128)
# against 256 (main, BASE). tg128 at depths 0, 2,048 and 8,192 with the model's whole context (64 chunks) on
# random GGUF files of Qwen2.5-0.5B's and Llama-3-8B's shapes in F16, each binary in turn, twice.
#   bench/device/session24_wg.sh BASE WG128   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py qwen2.5-0.5b F16 /tmp/qwen2.5-0.5b-F16.gguf
random_ggufs llama3-8b:F16  # in the background, while the small model runs
rounds 2 "qwen2.5-0.5b F16" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 128 -r 2 -d 0 2048 8192
wait
rounds 2 "llama3-8b F16" bench model --model /tmp/llama3-8b-F16.gguf -p 16 -g 128 -r 1 -d 0 2048 8192
section done
