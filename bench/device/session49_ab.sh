#!/usr/bin/env bash
# Forty-ninth session's first call (its log in $OUT/session49_ab.log): HEAD is 7448768; CAND, a change not kept,
# ran batched steps' products of 9 to 16 rows at least 512 wide (Llama-3-8B's gate|up, down and LM head, not its
# q|k|v or o; of Qwen2.5-0.5B's only the LM head), where their iterations make three quarters of a wave of shares,
# in tiles of 16 x 512 (a kernel linear_tiled_wide.wgsl: the tiled body with GROUP_ROWS 16, each thread 4 x 8
# outputs from one vec4 of x and two of W a k; W staged in four passes into one slab of workgroup memory after a
# second barrier, 17 KiB in all) rather than in linear_rows.wgsl, whose fused gate activation they then lose.
# In order:
#  1. `bench kernels --kernel linear` at 16 rows, HEAD and CAND (f16, Q4_0 and Q4_K rows);
#  2. CAND's `selftest --kernel linear` against float64 (its shapes of 9 to 16 rows in the new tiles);
#  3. random f16 weights of Llama-3-8B's shape decoding 8, 12 and 16 sequences (128 prompt tokens), HEAD and CAND in
#     turn, two rounds; its Q4_0 file at 16 once each;
#  4. Qwen2.5-0.5B's shape at 12 and 16 sequences;
#  5. the other tiles of the shared body, for regressions: the 8B at 32 and 64 sequences, and its pp512.
# Random GGUF files (bench/device/random_gguf.py) of the two shapes are written where this machine has none, and
# llama.cpp builds in the background, niced, for session49_peers.sh. Sections that would run past LIMIT (default
# 580) seconds are skipped.
#   bench/device/session49_ab.sh HEAD CAND
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session49_ab.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
l=/tmp/llama3-8b q=/tmp/qwen2.5-0.5b
[ -x /tmp/llama-build/bin/llama-bench ] || start_llama_cpp_build  # for session49_peers.sh, on this machine
missing_ggufs qwen2.5-0.5b:F16 llama3-8b:F16 llama3-8b:Q4_0 &
files=$!
binaries=("$1" "$2")
for b in "${binaries[@]}"; do
  room 60 && section "linear products at 16 rows: $(basename "$b")" &&
    timeout 60 "$b" bench kernels --kernel linear --shape "M=16 " | grep -E "M=16 " |
      grep -E "f16|Q4_0|Q4_K" | cut -c1-120
done
room 90 && section "CAND against float64" && timeout 90 "$2" selftest --kernel linear 2>&1 | tail -2
wait $files
for round in 1 2; do
  for b in "${binaries[@]}"; do
    room 45 && section "8B F16 batched, round $round: $(basename "$b")" &&
      timeout 60 "$b" bench model --model $l-F16.gguf -p 128 -g 64 --batch 8,12,16 | rows
  done
done
for b in "${binaries[@]}"; do
  room 40 && section "8B Q4_0 batched: $(basename "$b")" &&
    timeout 60 "$b" bench model --model $l-Q4_0.gguf -p 128 -g 64 --batch 16 | rows
  room 30 && section "0.5B F16 batched: $(basename "$b")" &&
    timeout 40 "$b" bench model --model $q-F16.gguf -p 128 -g 128 --batch 12,16 | rows
done
for b in "${binaries[@]}"; do
  room 60 && section "8B F16 at 32 and 64 sequences, pp512: $(basename "$b")" &&
    timeout 60 "$b" bench model --model $l-F16.gguf -p 128 -g 64 --batch 32,64 | rows &&
    timeout 60 "$b" bench model --model $l-F16.gguf -p 512 -g 16 -r 3 | rows
done
section done
