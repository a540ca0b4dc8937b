#!/usr/bin/env bash
# The twenty-fifth session's second H200 call: linear_q_matvec with whole chunks a lane and x staged in workgroup
# memory (gerbil-new: W bound as u32 words; gerbil-v4: as vec4<u32>) against main (gerbil-base): `bench kernels`
# on Llama-3-8B's down and gate_up decode shapes, then tg128 of random GGUF files (Llama-3-8B's shape in Q4_0 and
# Q4_K_M, Qwen2.5-0.5B's in Q8_0 and Q4_K_M) and 4 sequences of the 8B Q4_0 file, each binary in turn.
#   bench/device/session25_run.sh BASE NEW V4   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
for b in "$@"; do
  section "decode products: $(basename "$b")"
  for shape in "llama down M=1 " "llama gate_up M=1 " "qwen down M=1 "; do
    timeout 100 "$b" bench kernels --kernel linear --shape "$shape" | grep -E "Q[0-9]_[0-9KG]+ matvec  " | cut -c1-110
  done
done
wait
for f in "${quant_files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 16 -g 128 -r 2 -d 0 2048
done
each "llama3-8b Q4_0, 4 sequences" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 16 -g 64 -r 2 --batch 2,4
section done
