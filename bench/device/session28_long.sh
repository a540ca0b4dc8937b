#!/usr/bin/env bash
# The twenty-eighth session's fifth H200 call: llama.cpp (CUDA, flash attention; February 2025 source carried as
# .device/llama.cpp.tar.xz, built in the call) and gerbil on random F16 GGUF files of Llama-3-8B's and
# Qwen2.5-0.5B's shapes in the same call: long contexts (bench/peers/llama_depth_bench.sh: pp8192, tg128 at
# depths 0, 2,048, 8,192; issue 22) and batched decoding (bench/peers/llama_batched_bench.sh: 1, 4, 16, 64
# sequences of 128 + 128 tokens; issue 20).
#   bench/device/session28_long.sh GERBIL [PARTS] [DEPTHS]   (from the project root; carry [".device"])
# PARTS: "depth batched" (default), or one of them (the seventh call ran "batched" alone). DEPTHS: the decode depths
# (default 0,2048,8192; the thirty-first session's call ran `depth 0,32768`).
source "$(dirname "$0")/common.sh"
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
parts=${2:-depth batched} depths=${3:-0,2048,8192}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$GERBIL" tune | tail -1
start_llama_cpp_build
for f in llama3-8b qwen2.5-0.5b; do python3 bench/device/random_gguf.py $f F16 /tmp/$f-F16.gguf & done
wait $(jobs -p | grep -v "^$builder$")
section "files written; waiting for the llama.cpp build"
wait "$builder"
tail -1 /tmp/llama-build.log
for f in qwen2.5-0.5b llama3-8b; do
  [[ $parts == *depth* ]] || break
  section "long contexts, $f F16"
  timeout 300 bench/peers/llama_depth_bench.sh /tmp/llama-build /tmp/$f-F16.gguf 8192 "$depths" | peer_tables
done
for f in qwen2.5-0.5b llama3-8b; do
  [[ $parts == *batched* ]] || break
  section "batched decoding, $f F16"
  timeout 200 bench/peers/llama_batched_bench.sh /tmp/llama-build /tmp/$f-F16.gguf 1,4,16,64 | peer_tables
done
section done
