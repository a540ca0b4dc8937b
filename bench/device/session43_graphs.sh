#!/usr/bin/env bash
# Forty-third session, sixth call (its log in $OUT/session43_graphs.log): how much of the steady load's time goes
# to recording step graphs. serve_load.py (64 clients for 20 s through `gerbil serve --parallel 64`, greedy) with
# BINARY, which counts the graphs it records and the seconds spent (`gerbil_step_graphs_recorded_total`,
# `gerbil_step_graph_seconds_total`), at the default mix (20-400 words, 16-256 tokens) and with short prompts and
# answers (5-10 words, 16-256 tokens), the metrics read before and after the load.
# Carry .device/{s43,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session43_graphs.sh BINARY
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session43_graphs.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$1"
for mix in "20-400 16-256" "5-10 16-256"; do
  section "$(basename "$1"): 64 clients, greedy, words and tokens $mix"
  under_load "$1" "^gerbil_(step_graph|generation_tokens|prompt_tokens)" 20 0 '{}' $mix
done
section done
