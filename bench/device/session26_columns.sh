#!/usr/bin/env bash
# The twenty-sixth session's third H200 call: linear_q_matvec's rule taking four columns a team (one chunk a lane
# in flight) where the grid still holds half the resident workgroups (gerbil-c4) against main's two columns
# (gerbil-base): `bench kernels` on the decode shapes whose grid it changes (Llama-3-8B's gate_up,
# at 1 and 4 rows, and Qwen2.5-0.5B's, unchanged, at 1), every block type; then tg128 of random GGUF files (Llama-3-8B's shape
# in Q4_0 and Q4_K_M, Qwen2.5-0.5B's in Q8_0 and Q4_K_M) and 2 and 4 sequences of the 8B Q4_0 file, each binary
# in turn, two rounds.
#   bench/device/session26_columns.sh BASE C4   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
for b in "$@"; do
  section "decode products: $(basename "$b")"
  for shape in "llama gate_up M=1 " "llama gate_up M=4 " "qwen gate_up M=1 "; do
    timeout 100 "$b" bench kernels --kernel linear --shape "$shape" | grep -E "Q[0-9]_[0-9KG]+ matvec  " | cut -c1-110
  done
done
wait
for f in "${quant_files[@]}"; do
  rounds 2 "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 16 -g 128 -r 2
done
each "llama3-8b Q4_0, 2 and 4 sequences" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 16 -g 64 -r 2 --batch 2,4
section done
