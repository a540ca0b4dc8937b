#!/usr/bin/env bash
# The twenty-third session's third H200 call: flash_attention_sg with the q heads of a kv head in one workgroup
# (gerbil-h2: two, gerbil-h4: four, Llama-3-8B's whole group) against one head a workgroup (BASE), tg128 at
# depths 0, 2,048 and 8,192 on a random Llama-3-8B Q4_0 GGUF with its whole context (64 chunks), each binary in
# turn, twice.
#   bench/device/session23_heads.sh BASE H2 H4   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0
wait
rounds 2 "llama3-8b Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 16 -g 128 -r 2 -d 0 2048 8192
section done
