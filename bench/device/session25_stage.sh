#!/usr/bin/env bash
# The twenty-fifth session's third H200 call: when linear_q_matvec should stage x in workgroup memory. Binaries:
# main (gerbil-base), x always staged (gerbil-v4), staged for teams of at most 64 or 32 lanes (gerbil-s64,
# gerbil-s32), never staged (gerbil-s0). `bench kernels` on Qwen2.5-0.5B's decode shapes and Llama-3-8B's down,
# then tg128 of random GGUF files (Qwen2.5-0.5B's shape in Q8_0 and Q4_K_M, Llama-3-8B's in Q4_0), each binary
# in turn.
#   bench/device/session25_stage.sh BINARY...   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
files=(qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M llama3-8b:Q4_0)
random_ggufs "${files[@]}"
for b in "$@"; do
  section "decode products: $(basename "$b")"
  for shape in "qwen" "llama down M=1 "; do
    timeout 100 "$b" bench kernels --kernel linear --shape "$shape" | grep -E "M=1 " | grep -E "Q(4_0|4_K|8_0) matvec  " | cut -c1-110
  done
done
wait
for f in "${files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 16 -g 128 -r 3 -d 0
done
section done
