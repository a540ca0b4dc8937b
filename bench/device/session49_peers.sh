#!/usr/bin/env bash
# Forty-ninth session's second call, on the machine session49_ab.sh left warm (its llama.cpp build in
# /tmp/llama-build, its GGUF files in /tmp; its log in $OUT/session49_peers.log): llama.cpp (CUDA, flash attention)
# and gerbil on the same files in the same call, on a quiet machine (files not there are passed over):
#  1. llama-bench and gerbil bench model, pp512 and tg128 (bench/peers/llama_bench.sh), on every file;
#  2. batched decoding at 1 to 64 sequences (bench/peers/llama_batched_bench.sh) on the F16 files;
#  3. long contexts (bench/peers/llama_depth_bench.sh: pp8192, tg128 at depth 8,192) on the F16 files.
# Sections that would run past LIMIT (default 580) seconds are skipped.
#   bench/device/session49_peers.sh GERBIL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session49_peers.log") 2>&1
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
llama_cpp_ready
l=/tmp/llama3-8b q=/tmp/qwen2.5-0.5b
for f in $l-Q4_0 $l-Q4_K_M $q-Q8_0 $q-Q4_K_M $l-F16 $q-F16; do
  [ -f $f.gguf ] || continue
  room 45 && section "llama.cpp and gerbil on $(basename $f)" &&
    timeout 120 bench/peers/llama_bench.sh /tmp/llama-build $f.gguf -r 3 | peer_tables
done
for f in $q-F16 $l-F16; do
  [ -f $f.gguf ] || continue
  room 70 && section "batched decoding, $(basename $f)" &&
    timeout 150 bench/peers/llama_batched_bench.sh /tmp/llama-build $f.gguf 1,4,16,32,64 | peer_tables
done
for f in $q-F16 $l-F16; do
  [ -f $f.gguf ] || continue
  room 90 && section "long contexts, $(basename $f)" &&
    timeout 150 bench/peers/llama_depth_bench.sh /tmp/llama-build $f.gguf 8192 0,8192 | peer_tables
done
section done
