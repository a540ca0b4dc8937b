#!/usr/bin/env bash
# The twenty-first session's measuring H200 call: batched decoding (`bench model --batch 1,4,8,16`, like
# llama-batched-bench with 128 prompt tokens a sequence) of gerbil-base (main before the session) and gerbil-cand
# (linear_rows.wgsl in 8-column slices, one block piece a column at a time, and the gate activation fused into the
# gate|up projection of batched steps), each binary in turn on the same files: random f16 weights of Qwen2.5-0.5B's
# and Llama-3-8B's shapes, and random GGUF files (Qwen2.5-0.5B Q4_K_M, Llama-3-8B Q4_0).
# Last, if a third binary is given (one that also takes 4-column slices), linear_rows at 8 and 16 rows on
# Qwen's narrow products (N = 896, 1,152) at 4- and 8-column slices.
#   bench/device/session21_run.sh BASE CAND [EXPERIMENT]   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$1" "$2")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs qwen2.5-0.5b:Q4_K_M llama3-8b:Q4_0
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q > /dev/null
"$1" synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l8 > /dev/null
section tuning; "$1" tune | tail -3
each "0.5B f16" bench model --model /tmp/q -p 128 -g 128 --batch 1,4,8,16
each "8B f16" bench model --model /tmp/l8 -p 128 -g 32 --batch 1,4,8,16
wait
each "0.5B Q4_K_M" bench model --model /tmp/qwen2.5-0.5b-Q4_K_M.gguf -p 128 -g 128 --batch 1,4,8,16
each "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 128 -g 32 --batch 1,4,8,16
if [ $# -ge 3 ]; then
  section "4-column slices: $(basename "$3")"
  for m in 8 16; do
    timeout 120 "$3" bench kernels --kernel linear --shape "M=$m " --blocking 1,4,1 --blocking 1,4,2 --blocking 1,8,1 \
      --blocking 2,4,1 | grep -E "qwen .*M=$m " | grep -E "rows"
  done
fi
section done
