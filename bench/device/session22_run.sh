#!/usr/bin/env bash
# The twenty-second session's H200 call: decode products of block-quantized weights multiplying integer quants by
# x's 24-bit digits four at a time (dot4I8Packed; gerbil-cand) against f32 x (gerbil-base): `bench kernels` on the
# decode shapes, the machine code of the candidate's linear_q_matvec (does dot4I8Packed become IDP4A?), then
# `bench model` pp512 / tg128 on random GGUF files of Llama-3-8B's shape (Q4_0, Q4_K_M) and Qwen2.5-0.5B's (Q8_0,
# Q4_K_M), each binary in turn.
#   bench/device/session22_run.sh BASE CAND   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
files=(llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M)
random_ggufs "${files[@]}"
decode_rows() { grep -E "M=1 " | grep -E "Q[0-9]_[0-9KG] matvec|f16 matvec +(llama|qwen)" | cut -c1-110; }
for b in "${binaries[@]}"; do
  section "decode products: $(basename "$b")"
  timeout 200 "$b" bench kernels --kernel linear --shape "M=1 " | decode_rows
done
section "machine code of $(basename "$2")'s decode products"
mkdir -p /tmp/nvc
export PATH="$PATH:/usr/local/cuda/bin:$PWD/.device/bin"
(export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
 GERBIL_CACHE_DIR=off timeout 150 "$2" bench kernels --kernel linear --shape "llama down M=1 " --iterations 3 > /dev/null)
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass 2>&1 | tail -1
grep -l "IDP" /tmp/sass/*.sass | head; grep -c "IDP" /tmp/sass/*.sass | grep -v ":0"
tar czf "${OUT:-/tmp}/sass.tar.gz" -C /tmp sass
wait
for f in "${files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 512 -g 128 -r 2
done
section done
