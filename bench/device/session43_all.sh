#!/usr/bin/env bash
# Forty-third session, one call (its log in $OUT/session43_all.log). OLD is the forty-second session's final code
# (58a7e45: a batched step draws each sampled sequence's id with a sampler chain of its own, about 9 dispatches a
# row; penalties in a batch drawn on the host), NEW this session's: one sampler chain for all the rows of a step
# (each row's settings in a storage buffer), and penalties drawn on the GPU in a batch from per-slot token counts.
# In order:
#  1. `selftest --kernel sample` of NEW on the GPU;
#  2. the Qwen2.5-0.5B shape (f16) batched at 1, 4, 16 and 64 sequences, greedy, sampled (temperature 0.7, top-p
#     0.9) and with Qwen2.5's generation_config.json (temperature 0.7, top-k 20, top-p 0.8, repetition penalty
#     1.05: NEW only, OLD refuses penalties in a batch), OLD and NEW in turn;
#  3. one sequence: tg128 greedy and sampled (the same settings), OLD and NEW (the solo path takes the new chain
#     with one row);
#  4. 64 clients at once through `gerbil serve --parallel 64` (serve_concurrent.py): greedy, temperature 0.7, and
#     temperature 0.7 with a frequency penalty of 0.3, OLD and NEW.
# Carry .device/{s43,lib,bin,gpu-env.sh,tokenizers}.
#   bench/device/session43_all.sh OLD NEW
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session43_all.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$2"
section "NEW against float64"
timeout 120 "$2" selftest --kernel sample 2>&1 | tail -1
binaries=("$1" "$2")
sampled="temperature=0.7,top_p=0.9"
rounds 1 "0.5B batched, greedy" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64
rounds 2 "0.5B batched, sampled ($sampled)" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 \
  --sampling "$sampled"
section "0.5B batched, generation_config.json: NEW"
timeout 120 "$2" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 --sampling defaults | rows
rounds 1 "one sequence, greedy and sampled" bench model --model /tmp/qs -p 16 -g 128 -r 3 --sampling "$sampled"
for b in "$1" "$2"; do
  section "64 clients at once through serve --parallel 64: $(basename "$b")"
  "$b" serve --model /tmp/qs --port 8091 --parallel 64 2>/tmp/serve-64.log &
  server=$!
  for i in $(seq 60); do curl -sf localhost:8091/health > /dev/null && break; sleep 1; done
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 64 128 0
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 64 128 0.7
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 64 128 0.7 null '{"frequency_penalty": 0.3}'
  curl -s localhost:8091/metrics | grep -E "^gerbil_(host_draws|generation_tokens)_total"
  kill -INT $server
  wait $server
done
section done
