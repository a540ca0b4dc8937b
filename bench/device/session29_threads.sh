#!/usr/bin/env bash
# The twenty-ninth session's H200 call on which products take 64 x 128 prompt tiles in workgroups of 128 threads:
# main (BASE: 256 threads), every such product (ALL) and only those with at least half as many tiles as the
# adapter's resident 256-thread tiles (SOME), each in turn, two rounds: batched decoding at 16, 32 and 64 sequences
# (`bench model -p 128 --batch`) of random Llama-3-8B-shaped weights in f16, Q4_0 and Q4_K_M.
#   bench/device/session29_threads.sh BASE ALL SOME   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$1" "$2" "$3")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
f16_models "$1" llama
rounds 2 "8B f16" bench model --model /tmp/l8 -p 128 -g 32 --batch 16,32,64
wait
rounds 2 "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 128 -g 32 --batch 32,64
each "8B Q4_K_M" bench model --model /tmp/llama3-8b-Q4_K_M.gguf -p 128 -g 32 --batch 32,64
section done
