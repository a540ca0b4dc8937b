#!/usr/bin/env bash
# Forty-fourth session, one call (its log in $OUT/session44_ahead.log). OLD is the forty-third session's final
# code (e947b26; 806ab60 changes only scripts and docs): a batched decode step is queued ahead of the host only
# where no row has a mask or penalties. NEW queues the products of such steps ahead too (their picks wait for the
# host: a mask depends on the ids before it, a penalized draw counts its id). In order:
#  1. 16 and 64 clients at once through `gerbil serve --parallel N` (serve_concurrent.py, 128 tokens each): greedy,
#     temperature 0.7, temperature 0.7 with a frequency penalty of 0.3, and greedy constrained to a JSON object,
#     OLD and NEW in turn, with the steps-ahead counters of NEW's /metrics;
#  2. the Qwen2.5-0.5B shape batched at 1, 4, 16 and 64 sequences with Qwen2.5's generation_config.json
#     (repetition penalty 1.05), OLD and NEW, two rounds;
#  3. a steady load (serve_load.py, 64 clients, 20 s) with a frequency penalty of 0.3, OLD and NEW.
# Carry .device/{s43,s44,lib,bin,gpu-env.sh,tokenizers}.
#   bench/device/session44_ahead.sh OLD NEW
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session44_ahead.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$2"
object='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 300},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 40},
  "score": {"type": "number"}}, "required": ["name", "tags", "score"]}'
for clients in 16 64; do
  for b in "$1" "$2"; do
    section "$clients clients at once through serve --parallel $clients: $(basename "$b")"
    "$b" serve --model /tmp/qs --port 8091 --parallel "$clients" 2>/tmp/serve-$clients.log &
    server=$!
    for i in $(seq 60); do curl -sf localhost:8091/health > /dev/null && break; sleep 1; done
    timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0
    timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0.7
    timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0.7 null \
      '{"frequency_penalty": 0.3}'
    timeout 90 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0 "$object"
    curl -s localhost:8091/metrics | grep -E "^gerbil_(host_draws|generation_tokens|steps_ahead_[a-z]+)_total"
    kill -INT $server
    wait $server
  done
done
binaries=("$1" "$2")
rounds 2 "0.5B batched, generation_config.json" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 \
  --sampling defaults
for b in "$1" "$2"; do
  section "steady load, temperature 0.7 with frequency_penalty 0.3: $(basename "$b")"
  under_load "$b" "^gerbil_(generation_tokens|steps_ahead_[a-z]+)_total" 20 0.7 '{"frequency_penalty": 0.3}'
done
section done
