#!/usr/bin/env bash
# The fifty-third session's attention blocking (flash_attention_block.wgsl: an f16 cache's tile kept in its words,
# 4 rows x 4 keys a thread): BASE against CAND, the kernel alone (Qwen2.5-0.5B's heads; each cache type) and the
# prompts of both F16 shapes (pp512, and pp8192 in chunks of 2,048, whose attention dominates), in two rounds;
# CAND's selftest of the attention kernels first.
#   LIMIT=570 bench/device/session53_fa.sh BASE CAND
source "$(dirname "$0")/common.sh"
binaries=("$(realpath "$1")" "$(realpath "$2")")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs qwen2.5-0.5b:F16 llama3-8b:F16
section "selftest, CAND"
timeout 120 "${binaries[1]}" selftest --kernel flash_attention | tail -3
section "attention kernels"
for b in "${binaries[@]}"; do
  echo "--- $(basename "$b")"
  timeout 100 "$b" bench kernels --kernel attention --shape prefill | grep -E '^  flash'
done
for f in qwen2.5-0.5b-F16 llama3-8b-F16; do
  while ! [ -f /tmp/$f.gguf ]; do sleep 2; done
  room 200 && rounds 2 "$f" bench model --model /tmp/$f.gguf -p 8192 -g 4 -r 2 -d 0
done
for f in qwen2.5-0.5b-F16 llama3-8b-F16; do
  room 100 && rounds 1 "$f pp512" bench model --model /tmp/$f.gguf -p 512 -g 4 -r 3 -d 0
done
