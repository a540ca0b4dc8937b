#!/usr/bin/env bash
# One H200 device call: llama.cpp (CUDA, flash attention) and gerbil on the same random-block GGUF files, in the
# same call (issue 21's table). Builds llama.cpp from LLAMA_SRC (default .device/llama.cpp, staged there from a
# fetched source tree) with bench/peers/build_llama_cpp.sh in the background, on all cores but two, while gerbil
# profiles a Llama-3-8B-shaped Q4_0 decode step; then bench/peers/llama_bench.sh runs both engines file by file,
# alone on the machine. Stage gerbil in .device/bin and Dawn in .device/lib; run with carry [".device"].
# Everything goes to stdout: the device tool returns few files.
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
export PATH=/usr/local/cuda/bin:$PATH
export GERBIL_CACHE_DIR=/tmp/gerbil-cache GERBIL=$(command -v gerbil)
llama_src=${1:-.device/llama.cpp}
llama_build=/tmp/llama-build
section() { echo; echo "=== $(date +%T) $*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
section the adapter's tuning, measured before anything else loads the machine
gerbil tune

section build llama.cpp in the background
(JOBS=$(( $(nproc) - 2 )) nice -n 10 bench/peers/build_llama_cpp.sh "$llama_src" "$llama_build" \
   >/tmp/llama-build.log 2>&1; echo "build exit $?" >>/tmp/llama-build.log) &
builder=$!

files=(llama8-Q4_0 qwen05-Q8_0 qwen05-Q4_K_M llama8-Q4_K_M)
for f in "${files[@]}"; do
  preset=${f%%-*}; quant=${f#*-}
  [[ $preset == llama8 ]] && preset=llama3-8b || preset=qwen2.5-0.5b
  python3 bench/device/random_gguf.py "$preset" "$quant" "/tmp/$f.gguf"
done

section gerbil profile, llama8 Q4_0 decode
timeout 150 gerbil bench model --model /tmp/llama8-Q4_0.gguf -p 512 -g 128 -d 0 -r 3 --profile

section waiting for the llama.cpp build
wait "$builder"
tail -3 /tmp/llama-build.log
for f in "${files[@]}"; do
  section "llama.cpp and gerbil on $f"
  timeout 150 bench/peers/llama_bench.sh "$llama_build" "/tmp/$f.gguf" -r 3
done
section done
