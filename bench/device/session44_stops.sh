#!/usr/bin/env bash
# Forty-fourth session, fifth call (its log in $OUT/session44_stops.log). OLD is 9c5b06f (steps queued ahead taken
# before arrivals; none queued ahead of a known end), NEW (89565a7) also takes a step queued ahead when a sequence
# of its batch has ended at a stop id or string since (the others' rows are taken, the ended one's dropped). Random
# weights never draw an end-of-sequence id, so the answers here end at a stop string ("q": a few percent of
# Qwen's tokens hold one), at steps the scheduler cannot foresee. A steady load (`under_load`: serve_load.py, 64
# clients, 20 s, prompts of 20-400 words, answers of at most 16-256 tokens), greedy and at temperature 0.7, two
# rounds (ROUNDS, default 2) with the binaries in turn, with the steps-ahead counters of /metrics before and after each.
# Carry .device/{s44,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session44_stops.sh OLD NEW
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session44_stops.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
qwen_with_tokenizer "$2"
counters="^gerbil_(generation_tokens|steps_ahead_[a-z]+)_total"
for round in $(seq "${ROUNDS:-2}"); do
  for temperature in 0 0.7; do
    for b in "$1" "$2"; do
      section "stop \"q\", temperature $temperature, round $round: $(basename "$b")"
      under_load "$b" "$counters" 20 "$temperature" '{"stop": ["q"]}'
    done
  done
done
section done
