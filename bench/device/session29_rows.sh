#!/usr/bin/env bash
# The twenty-ninth session's H200 calls on batched decode products: a candidate linear_rows.wgsl (CAND; first the
# next run of weight pieces loaded before the current run's sums, then x staged in workgroup memory a segment at a
# time) against main (BASE), each in turn. (1) `bench kernels` at 16
# and 8 rows, f16 and Q4_0, at the dispatcher's blocking and at five others (COLUMNS,LANES,UNROLL); (2) batched
# decoding (`bench model -p 128 --batch`) of random f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes and of a
# random Llama-3-8B Q4_0 GGUF file, two rounds of the 0.5B.
#   bench/device/session29_rows.sh BASE CAND   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$1" "$2")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0
f16_models "$1" qwen llama
blockings=(--blocking 2,8,1 --blocking 2,8,2 --blocking 1,8,1 --blocking 1,8,2 --blocking 4,8,1 ${EXTRA_BLOCKINGS:-})
for m in 16 8; do
  for b in "${binaries[@]}"; do
    section "$(basename "$b"): linear_rows at $m rows"
    timeout 200 "$b" bench kernels --kernel linear --shape "M=$m " "${blockings[@]}" |
      grep -E "(f16|Q4_0) rows" | grep -E "(llama|qwen) " | cut -c1-120
  done
done
rounds 2 "0.5B f16" bench model --model /tmp/q -p 128 -g 128 --batch 4,16,64
each "8B f16" bench model --model /tmp/l8 -p 128 -g 32 --batch 4,16
wait
each "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 128 -g 32 --batch 8,16
section done
