#!/usr/bin/env bash
# The fifty-third session's last call: the committed blocking rule (4 x 4 blocks over an f16 cache's 64-key tiles of
# words at heads of 128 dims) on a real GPU: `selftest --kernel flash_attention` of FINAL (its full shape list, with
# Llama-3-8B's heads in blocks enough for 4 x 4), then the 0.5B F16 file's pp512 and pp8192 (heads of 64: FINAL
# keeps the earlier blockings there, with two partial sums a score) against BASE.
#   LIMIT=280 bench/device/session53_check.sh BASE FINAL
source "$(dirname "$0")/common.sh"
binaries=("$(realpath "$1")" "$(realpath "$2")")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs qwen2.5-0.5b:F16
section "selftest, FINAL"
timeout 150 "${binaries[1]}" selftest --kernel flash_attention | tail -3
while ! [ -f /tmp/qwen2.5-0.5b-F16.gguf ]; do sleep 2; done
rounds 2 "0.5B" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 8192 -g 4 -r 2 -d 0
each "0.5B pp512" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 512 -g 4 -r 3 -d 0
