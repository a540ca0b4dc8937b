#!/usr/bin/env bash
# Forty-third session, seventh call (its log in $OUT/session43_arena.log): step graphs whose uniform structs are
# ranges of a few shared buffers (kernels::UniformArena) instead of a buffer each. GRAPHS is the sixth call's
# binary (566995f, a buffer per dispatch), ARENA the new one. The steady load of session43_graphs.sh (64 clients for
# 20 s, greedy, the default mix and short prompts), the binaries in turn, with the graphs recorded and the seconds
# spent on them; then the 0.5B batched at 1 and 64 sequences and one sequence's tg128, each binary.
# Carry .device/{s43,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session43_arena.sh GRAPHS ARENA
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session43_arena.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$2"
for mix in "20-400 16-256" "5-10 16-256"; do
  for b in "$@"; do
    section "$(basename "$b"): 64 clients, greedy, words and tokens $mix"
    under_load "$b" "^gerbil_step_graph" 20 0 '{}' $mix
  done
done
binaries=("$1" "$2")
rounds 1 "0.5B batched" bench model --model /tmp/qs -p 128 -g 64 --batch 1,64
rounds 1 "one sequence" bench model --model /tmp/qs -p 16 -g 128 -r 3
section done
