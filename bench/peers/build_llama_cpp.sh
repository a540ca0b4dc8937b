#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and llama-quantize with CUDA for Hopper (sm_90), the peer bench/peers/llama_bench.sh
# compares gerbil with.  Usage: bench/peers/build_llama_cpp.sh LLAMA_SRC BUILD_DIR
# Binaries land in BUILD_DIR/bin. Needs cmake, a C++ compiler and CUDA's nvcc; no network.
# JOBS sets the parallel jobs (default: every core).
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 LLAMA_SRC BUILD_DIR" >&2
  exit 2
fi
src=$1 build=$2
[[ -f "$src/CMakeLists.txt" ]] || { echo "$src: no llama.cpp source tree (CMakeLists.txt missing)" >&2; exit 1; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DBUILD_SHARED_LIBS=OFF
cmake --build "$build" --target llama-bench llama-batched-bench llama-quantize -j "${JOBS:-$(nproc)}"
ls -l "$build/bin/llama-bench" "$build/bin/llama-batched-bench" "$build/bin/llama-quantize"
