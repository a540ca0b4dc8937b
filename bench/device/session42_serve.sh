#!/usr/bin/env bash
# Forty-second session, second and third calls (its log in $OUT/session42_serve.log). Second call: OLD is the
# binary of the first call (session42_all.sh, 6bfaac6: masks keyed by counts' distance to their bounds, with a
# token's bytes as the lookahead of characters and items alike; batched sampled and constrained picks on the GPU),
# NEW adds an array's own lookahead (a token's commas, and one; e775042). Third call: OLD is that NEW, NEW shares
# the masks of one schema's states between its requests and works out a batch's masks on several threads. In
# order:
#  1. one Qwen2.5-0.5B sequence streamed through `gerbil serve`, unconstrained and constrained to an array of short
#     strings and to an object, OLD and NEW (issue 20: constrained within 20 % of unconstrained);
#  2. 16 and 64 clients at once through `gerbil serve --parallel N` (serve_concurrent.py, 128 tokens each):
#     greedy, sampled (temperature 0.7) and constrained to the object, NEW;
#  3. the 0.5B batched at 1, 4, 16 and 64 sequences, greedy and sampled (temperature 0.7, top-p 0.9), NEW.
# Carry .device/{s42,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session42_serve.sh OLD NEW
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session42_serve.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/tokenizers && tar -C /tmp/tokenizers -xJf .device/tokenizers/qwen3.tar.xz
"$2" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --tokenizer /tmp/tokenizers/qwen3 --out /tmp/qs > /dev/null
object='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 300},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 40},
  "score": {"type": "number"}}, "required": ["name", "tags", "score"]}'
for b in "$1" "$2"; do
  streams "$b" /tmp/qs '{"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1000}' "$object"
done
for clients in 16 64; do
  section "$clients clients at once through serve --parallel $clients"
  "$2" serve --model /tmp/qs --port 8091 --parallel "$clients" 2>/tmp/serve-$clients.log &
  server=$!
  for i in $(seq 60); do curl -sf localhost:8091/health > /dev/null && break; sleep 1; done
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0.7
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 "$clients" 128 0 "$object"
  curl -s localhost:8091/metrics | grep -E "^gerbil_(host_draws|generation_tokens)_total"
  kill -INT $server
  wait $server
done
sampled="temperature=0.7,top_p=0.9"
section "0.5B batched, greedy"
timeout 120 "$2" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 | rows
section "0.5B batched, sampled ($sampled)"
timeout 120 "$2" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 --sampling "$sampled" | rows
section done
