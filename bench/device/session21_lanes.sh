#!/usr/bin/env bash
# The twenty-first session's last H200 call: 4-column slices of linear_rows for narrow products of element weights
# (gerbil-cand2) against 8-column ones (gerbil-cand), batched decoding of random f16 weights of Qwen2.5-0.5B's shape,
# each binary twice in turn.
#   bench/device/session21_lanes.sh CAND CAND2   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q > /dev/null
"$1" tune | tail -1
rounds 2 "0.5B f16" bench model --model /tmp/q -p 128 -g 128 --batch 8,16
section done
