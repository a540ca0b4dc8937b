#!/usr/bin/env bash
# Forty-sixth session (its log in $OUT/session46_tiles.log): batched decode products in tiles of 16 or 32 rows
# (linear_tiled_rows.wgsl) against linear_rows.wgsl (up to 16 rows) and 64-row tiles (17 to 64 rows). BASE is main
# before the change; CAND a one-off build of the change that took the new tiles (16 x 256 up to 16 rows, 32 x 256
# from 17 to 32, every shape) only with GERBIL_BATCH_TILES set, so that CAND alone made BASE's choices on CAND's
# generalized tile body: the prompt rows show whether that body costs the prompt kernel anything. (The committed
# dispatcher reads no such variable; bench/device/session46_rule.sh times its rule.) In order:
#  1. `selftest --kernel linear` of CAND with the new tiles (every shape of 5 to 32 rows with K % 8 == 0 on them);
#  2. `bench kernels --kernel linear` at 16 and 32 rows, BASE and CAND with the tiles;
#  3. batched decoding of random f16 weights of Llama-3-8B's and Qwen2.5-0.5B's shapes (128 prompt tokens) at 8,
#     16, 32 and 64 sequences, BASE and CAND with the tiles, two rounds; the 8B's step at 16 profiled with them;
#  4. pp512 of both shapes, BASE and CAND (no tiles: the prompt kernel's generalized body).
# Carry .device/{s46,lib,bin,debs,gpu-env.sh}. Models are kept in /tmp from an earlier call on the same machine.
#   bench/device/session46_tiles.sh BASE CAND
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session46_tiles.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
[ -f /tmp/l8/config.json ] && [ -f /tmp/q/config.json ] || f16_models "$1" qwen llama &
models=$!
section "CAND with the tiles against float64"
GERBIL_BATCH_TILES=1 timeout 200 "$2" selftest --kernel linear 2>&1 | tail -2
for b in "$1" "$2"; do
  section "linear products at 16 and 32 rows: $(basename "$b")"
  for M in 16 32; do
    GERBIL_BATCH_TILES=1 timeout 120 "$b" bench kernels --kernel linear --shape "M=$M " | grep -E "M=$M " | cut -c1-120
  done
done
wait $models
for round in 1 2; do
  for shape in l8 q; do
    g=64; [ $shape = l8 ] && g=32
    section "$shape batched, round $round: BASE"
    timeout 150 "$1" bench model --model /tmp/$shape -p 128 -g $g --batch 8,16,32,64 | rows
    section "$shape batched, round $round: CAND with the tiles"
    GERBIL_BATCH_TILES=1 timeout 150 "$2" bench model --model /tmp/$shape -p 128 -g $g --batch 8,16,32,64 | rows
  done
done
section "8B batched at 16, profiled: CAND with the tiles"
GERBIL_BATCH_TILES=1 timeout 120 "$2" bench model --model /tmp/l8 -p 128 -g 16 --batch 16 --profile | head -45
binaries=("$1" "$2")
each "8B pp512" bench model --model /tmp/l8 -p 512 -g 16 -r 3
each "0.5B pp512" bench model --model /tmp/q -p 512 -g 16 -r 3
section done
