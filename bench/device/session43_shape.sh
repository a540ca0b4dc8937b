#!/usr/bin/env bash
# Forty-third session, fifth call (its log in $OUT/session43_shape.log): what the steady load's rate depends on.
# serve_load.py (64 clients for 20 s through `gerbil serve --parallel 64`, greedy) with BINARY at four mixes of
# prompt words and answer tokens: the default (20-400 words, 16-256 tokens), short prompts (5-10 words), long
# answers (256 tokens each: fewer arrivals) and both.
# Carry .device/{s43,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session43_shape.sh BINARY
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session43_shape.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$1"
for mix in "20-400 16-256" "5-10 16-256" "20-400 256-256" "5-10 256-256"; do
  section "$(basename "$1"): 64 clients, greedy, words and tokens $mix"
  under_load "$1" "^gerbil_(prompt_tokens|generation_tokens)_total" 20 0 '{}' $mix
done
section done
