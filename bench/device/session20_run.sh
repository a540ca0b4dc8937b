#!/usr/bin/env bash
# The twentieth session's first H200 call: one-row decode products of block-quantized weights in linear_rows.wgsl
# (lanes on neighbouring columns at one k, a chunk's 16 bytes of quants per load, x read once for the workgroup's
# columns; gerbil-cand) against linear_q_matvec.wgsl (gerbil-base): `bench kernels` on the decode shapes (the
# candidate also at a sweep of its blockings), then `bench model` pp512 / tg128 on random GGUF files of
# Llama-3-8B's shape (Q4_0, Q4_K_M) and Qwen2.5-0.5B's (Q8_0, Q4_K_M), each binary in turn;
# then the 8B Q4_0 file's load time on a first and a second start (the candidate makes a shader module once per
# WGSL source, not once per pipeline); last, a KV cache asked for past the GPU's memory.
#   bench/device/session20_run.sh BASE CAND   (from the project root; output: one block per binary and section)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
section tuning; "$1" tune | tail -3
decode_rows() { grep -E "M=1 " | grep -E "Q[0-9]_[0-9KG]|f16 matvec"; }
for b in "${binaries[@]}"; do
  section "decode products: $(basename "$b")"
  timeout 150 "$b" bench kernels --kernel linear --shape "M=1 " | decode_rows
done
blockings=()
for c in 1 2 4; do for l in 8 16 32; do for u in 1 2 4; do blockings+=(--blocking "$c,$l,$u"); done; done; done
section "candidate blockings (COLUMNS,LANES,UNROLL), llama"
timeout 200 "$2" bench kernels --kernel linear --shape "llama" "${blockings[@]}" | grep -E "M=1 " | grep Q4_0
wait
for f in "${quant_files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 512 -g 128 -r 2
done
for b in "${binaries[@]}"; do  # each binary with a Dawn disk cache of its own: a user's first and second start
  for run in first second; do
    section "8B Q4_0 load, $run start: $(basename "$b")"
    GERBIL_CACHE_DIR="/tmp/gerbil-cache-$(basename "$b")" timeout 120 "$b" bench model --model /tmp/llama3-8b-Q4_0.gguf \
      -p 16 -g 16 -d 0 -r 1 | grep -E "^load"
  done
done
section "a cache larger than the GPU's memory: a clear error, exit 1"
timeout 120 "$2" generate --greedy --model /tmp/llama3-8b-Q4_0.gguf --ctx 1900000 --tokens 1,2,3 -n 4 2>&1 | tail -3
echo "rc=${PIPESTATUS[0]}"
section done
