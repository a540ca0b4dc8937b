#!/usr/bin/env bash
# The twenty-ninth session's last H200 call: main (BASE) against 64 x 128 prompt tiles of 128 threads everywhere
# (ALL), at 64 sequences alone and after 16 and 32 in the same process (`bench model -p 128 -g 32 --batch`), random
# Llama-3-8B-shaped f16 weights, two rounds.
#   bench/device/session29_check.sh BASE ALL   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$1" "$2")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
f16_models "$1" llama
rounds 2 "8B f16" bench model --model /tmp/l8 -p 128 -g 32 --batch 64
each "8B f16" bench model --model /tmp/l8 -p 128 -g 32 --batch 16,32,64
section done
