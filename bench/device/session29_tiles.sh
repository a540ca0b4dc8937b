#!/usr/bin/env bash
# The twenty-ninth session's H200 call on prompt-kernel tiles of 64 x 128: CAND runs them in workgroups of 128
# threads (8 x 8 outputs a thread, as 128 x 128 tiles have) where main (BASE) runs 256 (4 x 8), each binary in
# turn. (1) `bench kernels` on the products of 17 to 64 rows (Llama-3-8B's and Qwen2.5-0.5B's shapes, f16 and
# Q4_0); (2) batched decoding at 32 and 64 sequences
# (`bench model -p 128 --batch`) and pp512, random f16 weights of both shapes
# and a random Llama-3-8B Q4_0 GGUF file.
#   bench/device/session29_tiles.sh BASE CAND   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$1" "$2")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0
f16_models "$1" qwen llama
for b in "${binaries[@]}"; do
  section "$(basename "$b"): products of 17 to 64 rows"
  timeout 200 "$b" bench kernels --kernel linear --shape "M=" | grep -E "M=(17|32|64) " | grep -E "(f16|Q4_0)" |
    cut -c1-120
done
rounds 2 "0.5B f16" bench model --model /tmp/q -p 128 -g 128 --batch 32,64
rounds 2 "8B f16" bench model --model /tmp/l8 -p 128 -g 32 --batch 32,64
each "8B f16" bench model --model /tmp/l8 -p 512 -g 16 -r 2
wait
each "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 128 -g 32 --batch 64
each "8B Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 512 -g 16 -r 2
section done
