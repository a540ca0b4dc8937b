#!/usr/bin/env bash
# The twenty-third session's second H200 call: main (BASE) against the candidate (CAND: K-quant repacking at
# load ten times faster; split-KV decode attention whose empty chunks write no record, the combine reading only
# the chunks with keys). Loading an 8B Q4_K_M and Q4_0 GGUF (the `load:` lines), then tg128 at depths 0, 2,048
# and 8,192 with the model's whole context (32,768: 64 chunks) on random GGUF files: Qwen2.5-0.5B F16, Llama-3-8B
# Q4_0 and F16, each binary in turn.
#   bench/device/session23_depth.sh BASE CAND   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
files=(llama3-8b:Q4_K_M llama3-8b:Q4_0 qwen2.5-0.5b:F16 llama3-8b:F16)
random_ggufs "${files[@]}"
wait
loads() { grep -E "^(load|loaded)"; }
for f in llama3-8b:Q4_K_M llama3-8b:Q4_0; do
  for b in "${binaries[@]}" "${binaries[@]}"; do
    section "load ${f/:/ }: $(basename "$b")"
    timeout 120 "$b" bench model --model "/tmp/${f/:/-}.gguf" -p 16 -g 16 -r 1 | loads
  done
done
for f in qwen2.5-0.5b:F16 llama3-8b:Q4_0 llama3-8b:F16; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 16 -g 128 -r 2 -d 0 2048 8192
done
section done
