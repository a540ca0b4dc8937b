#!/usr/bin/env bash
# The twenty-second session's second H200 call: blockings of the integer-digit decode product (COLUMNS,TEAM,
# CHUNK_LANES) on gerbil-cand, then gerbil-cand2 (a lane takes whole chunks: CHUNK_LANES 1 for every type) against
# gerbil-base on the decode shapes and the random GGUF models of session22_run.sh.
#   bench/device/session22_sweep.sh BASE CAND CAND2   (from the project root)
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
blockings=()
for c in 1 2 4; do for s in 32 64; do for u in 1 2 4; do blockings+=(--blocking "$c,$s,$u"); done; done; done
for shape in "llama down M=1 " "llama gate_up M=1 " "qwen gate_up M=1 "; do
  section "blockings of $(basename "$2"): $shape"
  timeout 200 "$2" bench kernels --kernel linear --shape "$shape" "${blockings[@]}" | grep -E "Q4_[0K] matvec" | cut -c1-110
done
section "decode products: $(basename "$3")"
timeout 200 "$3" bench kernels --kernel linear --shape "M=1 " | grep -E "M=1 " | grep -E "Q[0-9]_[0-9KG] matvec" | cut -c1-110
wait
binaries=("$1" "$3")
for f in "${quant_files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 512 -g 128 -r 2
done
section done
