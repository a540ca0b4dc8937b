#!/usr/bin/env bash
# The twenty-eighth session's second H200 call: llama.cpp (CUDA, flash attention) and gerbil on the same random
# GGUF files in the same call (issue 21's table): llama.cpp's February 2025 source, carried as
# .device/llama.cpp.tar.xz, built in the call with bench/peers/build_llama_cpp.sh on all cores but two while the
# files are written; then, on a quiet machine, bench/peers/llama_bench.sh (llama-bench -p 512 -n 128 -fa 1 and
# gerbil bench model -p 512 -g 128) file by file.
#   bench/device/session28_peer.sh GERBIL   (from the project root; carry [".device"])
source "$(dirname "$0")/common.sh"
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
section "the adapter's tuning, before anything else loads the machine"
"$GERBIL" tune | tail -2
section "build llama.cpp in the background"
start_llama_cpp_build
files=(llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M)
for f in "${files[@]}"; do python3 bench/device/random_gguf.py "${f%%:*}" "${f#*:}" "/tmp/${f/:/-}.gguf" & done
wait $(jobs -p | grep -v "^$builder$")
section "files written; waiting for the llama.cpp build"
wait "$builder"
tail -2 /tmp/llama-build.log
for f in "${files[@]}"; do
  section "llama.cpp and gerbil on ${f/:/-}"
  timeout 150 bench/peers/llama_bench.sh /tmp/llama-build "/tmp/${f/:/-}.gguf" -r 3 | peer_tables
done
section done
