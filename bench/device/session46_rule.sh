#!/usr/bin/env bash
# Forty-sixth session (its log in $OUT/session46_rule.log): the rule that gives a product of 17 to 32 rows
# linear_tiled_rows.wgsl's 32 x 256 tiles (kernels::use_batch_tiles: where their iterations make three quarters
# of a wave of shares of 32 slabs). MAIN is e8b9f46 (64-row tiles from 17 rows), NEW the rule, FORCE NEW with every such product
# in the new tiles (a one-off build: the rule's last line `return iterations > 0;`). In order:
#  1. `selftest --kernel linear` of NEW (its shapes of 17 to 32 rows), and the kernel suites' tests of the tiles
#     (gpu_tests.sh: test_kernels_quant's batched and prompt products, test_kernels_model's LinearSplit);
#  2. `bench kernels --kernel linear` at 32 rows, NEW (Qwen's products in 64-row tiles, Llama's in the new ones)
#     and FORCE (all in the new ones);
#  3. batched decoding of random f16 weights of Llama-3-8B's and Qwen2.5-0.5B's shapes (128 prompt tokens) at 17,
#     24 and 32 sequences: MAIN and NEW in turn, two rounds; FORCE once for the 0.5B.
# Carry .device/{s46,lib,bin,debs,gpu-env.sh,gpu_tests.tar.zst}.
#   bench/device/session46_rule.sh MAIN NEW FORCE
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session46_rule.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
[ -f /tmp/l8/config.json ] && [ -f /tmp/q/config.json ] || f16_models "$1" qwen llama &
models=$!
section "NEW against float64"
timeout 200 "$2" selftest --kernel linear 2>&1 | tail -2
section "GPU suites"
bash bench/device/gpu_tests.sh '*BatchedDecode*:*PromptProducts*:LinearSplit.*' 2>&1 |
  grep -E "^===|PASSED|FAILED|tests? ran|Failure|error"
for b in "$2" "$3"; do
  section "linear products at 32 rows: $(basename "$b")"
  timeout 120 "$b" bench kernels --kernel linear --shape "M=32 " | grep -E "M=32 " | cut -c1-120
done
wait $models
for round in 1 2; do
  for shape in l8 q; do
    g=64; [ $shape = l8 ] && g=32
    for b in "$1" "$2"; do
      section "$shape batched, round $round: $(basename "$b")"
      timeout 150 "$b" bench model --model /tmp/$shape -p 128 -g $g --batch 17,24,32 | rows
    done
  done
done
section "q batched: FORCE"
timeout 150 "$3" bench model --model /tmp/q -p 128 -g 64 --batch 17,24,32 | rows
section done
