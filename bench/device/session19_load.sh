#!/usr/bin/env bash
# The nineteenth session's load-time call: `bench model` twice in a row on random GGUF files of Llama-3-8B's shape
# (Q4_0, Q4_K_M; bench/device/random_gguf.py). Both runs find the file in the page cache (it was just written);
# the first compiles every pipeline, the second finds them in Dawn's disk cache (GERBIL_CACHE_DIR), as a user's
# second start does. Prints each run's load line.
#   bench/device/session19_load.sh GERBIL   (from the project root)
source "$(dirname "$0")/common.sh"
gerbil=$1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for quant in Q4_0 Q4_K_M; do python3 bench/device/random_gguf.py llama3-8b "$quant" "/tmp/l8-$quant.gguf"; done
"$gerbil" tune | tail -1
for model in /tmp/l8-Q4_0.gguf /tmp/l8-Q4_K_M.gguf; do
  for run in first second; do
    section "$model, $run run"
    timeout 120 "$gerbil" bench model --model "$model" -p 16 -g 16 -r 1 | grep -E "^(load|tg16|pp16)"
  done
done
section done
