#!/usr/bin/env bash
# Forty-ninth session's third call, on the machine the first two left warm (its log in $OUT/session49_quant.log):
# llama.cpp and gerbil (bench/peers/llama_bench.sh: pp512, tg128) on the K-quant and Q8_0 files the earlier calls
# did not write: Llama-3-8B's shape in Q4_K_M, Qwen2.5-0.5B's in Q8_0 and Q4_K_M. Builds llama.cpp first on a
# fresh machine. Sections that would run past LIMIT (default 580) seconds are skipped.
#   bench/device/session49_quant.sh GERBIL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session49_quant.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
llama_cpp_ready
files=(qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M llama3-8b:Q4_K_M)
for f in "${files[@]}"; do
  missing_ggufs "$f"
  room 40 && section "llama.cpp and gerbil on ${f/:/-}" &&
    timeout 120 bench/peers/llama_bench.sh /tmp/llama-build "/tmp/${f/:/-}.gguf" -r 3 | peer_tables
done
section done
