#!/usr/bin/env bash
# The thirty-first session's H200 call: decode at depth 32,768 (issue 22 asks depths 0, 2,048, 8,192 and 32,768;
# the others are the twenty-eighth session's), llama.cpp (CUDA, flash attention; February 2025 source carried as
# .device/llama.cpp.tar.xz, built in the call) and gerbil on the same random F16 GGUF files of Qwen2.5-0.5B's and
# Llama-3-8B's shapes: bench/peers/llama_depth_bench.sh with depths 0 and 32,768 (depth 0 again as the call's own
# reference point).
#   bench/device/session31_depth.sh GERBIL   (from the project root)
source "$(dirname "$0")/common.sh"
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$GERBIL" tune | tail -1
start_llama_cpp_build
for f in llama3-8b qwen2.5-0.5b; do python3 bench/device/random_gguf.py $f F16 /tmp/$f-F16.gguf & done
wait $(jobs -p | grep -v "^$builder$")
section "files written; waiting for the llama.cpp build"
wait "$builder"
tail -1 /tmp/llama-build.log
for f in qwen2.5-0.5b llama3-8b; do
  section "depth 32,768, $f F16"
  timeout 300 bench/peers/llama_depth_bench.sh /tmp/llama-build /tmp/$f-F16.gguf 8192 0,32768 | peer_tables
done
section done
