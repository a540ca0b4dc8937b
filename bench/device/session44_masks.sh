#!/usr/bin/env bash
# Forty-fourth session, second and third calls (their log in $OUT/session44_masks.log): what a JSON-schema
# constraint costs a batch, with answers that all run their 128 tokens (an array of at least 1,000 short strings)
# beside the object of the first call (whose answers end at different steps, so that its batch shrinks): 16 and 64
# clients at once through `gerbil serve --parallel N` (serve_concurrent.py), greedy unconstrained, constrained to
# the array and to the object, two rounds, each binary given in turn (the second call NEW, session44_ahead.sh's;
# the third OLD and NEW).
# Carry .device/{s43,s44,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session44_masks.sh BINARY...
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session44_masks.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "${@: -1}"
array='{"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1000}'
object='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 300},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 40},
  "score": {"type": "number"}}, "required": ["name", "tags", "score"]}'
for clients in 16 64; do for b in "$@"; do
  section "$clients clients at once through serve --parallel $clients: $(basename "$b")"
  "$b" serve --model /tmp/qs --port 8091 --parallel "$clients" 2>/tmp/serve-$clients.log &
  server=$!
  for i in $(seq 60); do curl -sf localhost:8091/health > /dev/null && break; sleep 1; done
  for round in 1 2; do
    timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0
    timeout 90 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0 "$array"
    timeout 90 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0 "$object"
  done
  curl -s localhost:8091/metrics | grep -E "^gerbil_(generation_tokens|steps_ahead_[a-z]+)_total"
  kill -INT $server
  wait $server
done; done
section done
