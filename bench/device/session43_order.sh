#!/usr/bin/env bash
# Forty-third session, third call (its log in $OUT/session43_order.log): the steady load of session43_load.sh
# (serve_load.py, 64 clients for 20 s through `gerbil serve --parallel 64`), greedy and at temperature 0.7, two
# rounds with the binaries in turn. MIXED is the second call's NEW (49b16f5: a batch's decoding rows in the order of
# their sequences' ages, so every arrival or departure makes a batch shape whose step graph is recorded anew), ORDER
# puts them in slot order (the same slots decoding together are the same graph).
# Carry .device/{s43,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session43_order.sh MIXED ORDER
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session43_order.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$2"
for round in 1 2; do
  for temperature in 0 0.7; do
    for b in "$@"; do
      section "round $round, $(basename "$b"): 64 clients, temperature $temperature"
      under_load "$b" "^gerbil_host_draws_total" 20 "$temperature"
    done
  done
done
section done
