#!/usr/bin/env bash
# Forty-third session, second call (its log in $OUT/session43_load.log): a steady load on `gerbil serve --parallel
# 64` (serve_load.py: 64 clients sending requests of random prompt and answer lengths one after another for 20 s,
# so that prompts are prefilled in steps beside the running sequences). BASE is the forty-second session's final
# code (58a7e45), CHAIN the first call's NEW (6f0f725: one sampler chain for all rows of a batched step; a step
# that takes prompt tokens still reads its logits back and draws on the host), NEW this session's next (such steps
# pick on the GPU too, a prompt's first id included). Greedy, temperature 0.7, and temperature 0.7 with a frequency
# penalty of 0.3, each binary in turn; the server's host draws after each.
# Carry .device/{s43,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session43_load.sh BASE CHAIN NEW
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session43_load.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$3"
for fields in '{}' '{"frequency_penalty": 0.3}'; do
  for temperature in 0 0.7; do
    [ "$fields" != '{}' ] && [ "$temperature" = 0 ] && continue
    for b in "$@"; do
      section "$(basename "$b"): 64 clients, temperature $temperature, $fields"
      under_load "$b" "^gerbil_(host_draws|generation_tokens)_total" 20 "$temperature" "$fields"
    done
  done
done
section done
