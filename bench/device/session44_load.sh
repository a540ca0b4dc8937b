#!/usr/bin/env bash
# Forty-fourth session, fourth call (its log in $OUT/session44_load.log). OLD is 9db94f4 (a batch's steps with masks
# or penalties queue their products ahead), NEW 9c5b06f: a prompt that arrives while a decode step is queued ahead
# waits for that step instead of discarding it, and no step is queued ahead of one that admits a request or ends a
# sequence at its max_tokens. A steady load (`under_load`: serve_load.py, 64 clients, 20 s), the binaries in turn:
#  1. prompts of 20-400 words, answers of 16-256 tokens: greedy (two rounds), temperature 0.7, temperature 0.7
#     with a frequency penalty of 0.3;
#  2. prompts of 5-10 words (arrivals dominate), answers of 16-256 tokens, greedy (two rounds);
# with the steps-ahead counters of /metrics before and after each.
# Carry .device/{s44,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session44_load.sh OLD NEW
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session44_load.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$2"
counters="^gerbil_(generation_tokens|steps_ahead_[a-z]+)_total"
load() {  # load LABEL ARGS...: under_load of each binary in turn
  local label=$1 b
  shift
  for b in "${binaries[@]}"; do
    section "$label: $(basename "$b")"
    under_load "$b" "$counters" "$@"
  done
}
binaries=("$1" "$2")
load "greedy, round 1" 20 0
load "greedy, round 2" 20 0
load "temperature 0.7" 20 0.7
load "temperature 0.7, frequency_penalty 0.3" 20 0.7 '{"frequency_penalty": 0.3}'
load "short prompts, greedy, round 1" 20 0 '{}' 5-10
load "short prompts, greedy, round 2" 20 0 '{}' 5-10
section done
