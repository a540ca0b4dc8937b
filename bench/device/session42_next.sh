#!/usr/bin/env bash
# Queued by the forty-first session, whose one call ran out of device time before these (its log in
# $OUT/session42_next.log). MAIN is the fortieth session's final code (eca8617), NEW the forty-first's (46c9903 or
# later), ENV_TEAMS MAIN reading linear_rows' teams from GERBIL_TEAMS (a one-off build: in
# kernels::linear_rows_blocking, `if (b.teams == 0) b.teams = getenv("GERBIL_TEAMS") ? atoi(...) : 1;`).
#  1. one Qwen2.5-0.5B sequence streamed through `gerbil serve`, unconstrained and constrained to a long JSON
#     string and to an array of short strings, MAIN and NEW: NEW's masked steps now overlap the host's mask with
#     their products (c15b59f);
#  2. `bench kernels` of linear_rows at 16 rows over blockings COLUMNS,LANES,UNROLL,TEAMS (f16, Q4_0), then
#     batched decoding of random f16 Llama-3-8B weights at 16 and 64 sequences with 1, 2 and 4 teams.
# Carry .device/{sNN,lib,bin,debs,gpu-env.sh,tokenizers}.
#   bench/device/session42_next.sh MAIN NEW ENV_TEAMS
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session42_next.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
f16_models "$1" llama &
mkdir -p /tmp/tokenizers && tar -C /tmp/tokenizers -xJf .device/tokenizers/qwen3.tar.xz
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --tokenizer /tmp/tokenizers/qwen3 --out /tmp/qs > /dev/null
# The long string's masks are a new state at every character count (minLength); short strings' repeat (each
# one's count stays under 9), so most come from the cache.
for b in "$1" "$2"; do
  streams "$b" /tmp/qs '{"type": "string", "minLength": 100000}' \
    '{"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1000}'
done
section "linear_rows at 16 rows: blockings COLUMNS,LANES,UNROLL,TEAMS"
blockings=()
for b in 2,8,2,1 2,8,2,2 2,8,2,4 2,8,2,8 2,8,1,4 4,8,1,1 4,8,1,2 4,8,1,4 1,8,4,8; do blockings+=(--blocking "$b"); done
timeout 90 "$1" bench kernels --kernel linear --shape "M=16 " "${blockings[@]}" | grep -E "M=16 " | cut -c1-110
wait
for teams in 1 2 4; do
  section "8B f16 batched, $teams teams"
  GERBIL_TEAMS=$teams timeout 150 "$3" bench model --model /tmp/l8 -p 128 -g 32 -r 1 --batch 16 64 | rows
done
section done
