#!/usr/bin/env bash
# Forty-seventh session: one short call after eight failed starts had left it about 360 s of device time (its log in
# $OUT/session47_short.log; the session's later calls, run by hand on the warm machine, are its sections 3 to 5).
# NEW is 654298d (products of 17 to 32 rows in linear_tiled_rows.wgsl's 32 x 256 tiles, 33 to 64 in
# linear_tiled.wgsl's 64-row ones), CAND NEW with 33 to 64 rows in linear_tiled_rows.wgsl's 64 x 256 tiles (two
# row groups: 8 x 8 outputs a thread, where the 64 x 128 tiles gave 4 x 8):
#  1. `bench kernels --kernel linear` at 64 rows, NEW and CAND;
#  2. random f16 weights of Llama-3-8B's shape decoding 64 sequences (128 prompt tokens), NEW then CAND;
#  3. the same at 48 and 64 sequences, CAND then NEW;
#  4. random f16 weights of Qwen2.5-0.5B's shape at 48 and 64 sequences, NEW and CAND in turn, two rounds (its
#     products stay out of the new tiles but for its LM head);
#  5. CAND's `selftest --kernel linear` against float64 (its shapes of 17 to 64 rows).
# Carry .device/{s47,lib,debs,gpu-env.sh}.
#   bench/device/session47_short.sh NEW CAND
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session47_short.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
f16_models "$2" llama qwen &
models=$!
for b in "$1" "$2"; do
  section "linear products at 64 rows: $(basename "$b")"
  timeout 60 "$b" bench kernels --kernel linear --shape "M=64 " | grep -E "M=64 " | cut -c1-120
done
wait $models
binaries=("$1" "$2")
rounds 1 "l8 batched" bench model --model /tmp/l8 -p 128 -g 32 --batch 64
binaries=("$2" "$1")
rounds 1 "l8 batched" bench model --model /tmp/l8 -p 128 -g 32 --batch 48,64
binaries=("$1" "$2")
rounds 2 "q batched" bench model --model /tmp/q -p 128 -g 64 --batch 48,64
section "CAND against float64"
timeout 80 "$2" selftest --kernel linear 2>&1 | tail -2
section done
