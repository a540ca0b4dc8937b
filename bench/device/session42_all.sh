#!/usr/bin/env bash
# Forty-second session, one call (its log in $OUT/session42_all.log). NEW is this session's code: a JSON
# constraint's masks keyed by how far its counts are from their bounds (a long string or array reuses one mask),
# and batched steps that draw sampled sequences' ids on the GPU (a sampler chain per row) where the last session's
# code read every row's logits back and drew on the host. ENV_TEAMS is NEW reading linear_rows' teams from
# GERBIL_TEAMS (a one-off build: in kernels::linear_rows_blocking,
# `if (b.teams == 0) b.teams = getenv("GERBIL_TEAMS") ? atoi(getenv("GERBIL_TEAMS")) : 1;`). In order:
#  1. `selftest --kernel sample` (rows at an offset) on the GPU; one Qwen2.5-0.5B sequence streamed through
#     `gerbil serve`, unconstrained and constrained to a long string, an array of short strings and an object
#     (issue 20: constrained within 20 % of unconstrained);
#  2. the 0.5B batched at 1, 4, 16 and 64 sequences, greedy and sampled (temperature 0.7, top-p 0.9);
#  3. `bench kernels` of linear_rows at 16 rows over teams, then random f16 Llama-3-8B weights batched at 16 and
#     64 sequences with 1, 2 and 4 teams, and sampled.
# Carry .device/{s42,lib,bin,debs,gpu-env.sh,tokenizers}.
# With a third argument `short` (little device time left), it stops after the 0.5B rows (2).
#   bench/device/session42_all.sh NEW ENV_TEAMS [short]
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session42_all.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
[ "${3:-}" = short ] || f16_models "$1" llama &
mkdir -p /tmp/tokenizers && tar -C /tmp/tokenizers -xJf .device/tokenizers/qwen3.tar.xz
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --tokenizer /tmp/tokenizers/qwen3 --out /tmp/qs > /dev/null
section "NEW against float64"
timeout 100 "$1" selftest --kernel sample 2>&1 | tail -1
object='{"type": "object", "properties": {"name": {"type": "string", "maxLength": 300},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 40},
  "score": {"type": "number"}}, "required": ["name", "tags", "score"]}'
streams "$1" /tmp/qs '{"type": "string", "minLength": 100000}' \
  '{"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1000}' "$object"
sampled="temperature=0.7,top_p=0.9"
section "0.5B batched, greedy"
timeout 120 "$1" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 | rows
section "0.5B batched, sampled ($sampled)"
timeout 120 "$1" bench model --model /tmp/qs -p 128 -g 64 --batch 1,4,16,64 --sampling "$sampled" | rows
if [ "${3:-}" = short ]; then section done; exit 0; fi
section "linear_rows at 16 rows: blockings COLUMNS,LANES,UNROLL,TEAMS"
blockings=()
for b in 2,8,2,1 2,8,2,2 2,8,2,4 4,8,1,1 4,8,1,2 4,8,1,4; do blockings+=(--blocking "$b"); done
timeout 90 "$1" bench kernels --kernel linear --shape "M=16 " "${blockings[@]}" | grep -E "M=16 " | cut -c1-110
wait
for teams in 1 2 4; do
  section "8B f16 batched, $teams teams"
  GERBIL_TEAMS=$teams timeout 120 "$2" bench model --model /tmp/l8 -p 128 -g 32 --batch 16,64 | rows
done
section "8B f16 batched, sampled ($sampled)"
timeout 120 "$1" bench model --model /tmp/l8 -p 128 -g 32 --batch 16,64 --sampling "$sampled" | rows
section done
