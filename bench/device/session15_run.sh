#!/usr/bin/env bash
# One H200 device call for the fifteenth session's tables, gerbil and llama.cpp (CUDA, flash attention) on the
# same GGUF files in the same call:
#   - issue 21: pp512 / tg128 on random-block Q4_0, Q4_K_M (Llama-3-8B shape), Q8_0 and Q4_K_M (Qwen2.5-0.5B
#     shape), with the load time (bench/peers/llama_bench.sh);
#   - issues 20 and 22 on a random F16 file of Qwen2.5-0.5B's shape: batched decoding at 1, 4, 16, 64 sequences
#     (bench/peers/llama_batched_bench.sh) and long contexts, pp8192 and tg128 at depths 0, 2,048, 8,192
#     (bench/peers/llama_depth_bench.sh);
#   - gerbil alone, while llama.cpp builds: a baseline binary (BASE, optional) against the staged one on the 8B
#     Q4 files, and one sequence streamed through `gerbil serve` against `bench model`'s tg128 on the same model
#     (bench/device/serve_stream.py).
#   bench/device/session15_run.sh [BASE]
# Stage gerbil in .device/bin, Dawn in .device/lib, llama.cpp's source as .device/llama.cpp.tar.xz and the Qwen3
# tokenizer as .device/tokenizers/qwen3.tar.xz (compressed: the carried tree must stay under 64 MiB); run with
# carry [".device/bin", ".device/lib", ".device/debs", ".device/gpu-env.sh", ".device/llama.cpp.tar.xz",
# ".device/tokenizers"] and the folder of BASE. Everything goes to stdout.
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
base=${1:+$(realpath "$1")}
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export GERBIL_CACHE_DIR=/tmp/gerbil-cache GERBIL=$(command -v gerbil) GERBIL_TOKENIZERS=/tmp/tokenizers
llama_build=/tmp/llama-build
t0=$(date +%s)
section() { echo; echo "=== [$(( $(date +%s) - t0 )) s] $*"; }
rows() { grep -E "^(pp|tg|load|time to)"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
section the adapter\'s tuning, measured before anything else loads the machine
gerbil tune

section build llama.cpp in the background
tar -C /tmp -xJf .device/llama.cpp.tar.xz
(JOBS=12 nice -n 10 bench/peers/build_llama_cpp.sh /tmp/llama.cpp "$llama_build" >/tmp/llama-build.log 2>&1
 echo "build exit $?" >>/tmp/llama-build.log) &
builder=$!

section files
mkdir -p /tmp/tokenizers && tar -C /tmp/tokenizers -xJf .device/tokenizers/qwen3.tar.xz
files=(llama8-Q4_0 llama8-Q4_K_M qwen05-Q8_0 qwen05-Q4_K_M qwen05-F16)
for f in "${files[@]}"; do
  preset=${f%%-*} quant=${f#*-}
  [[ $preset == llama8 ]] && preset=llama3-8b || preset=qwen2.5-0.5b
  python3 bench/device/random_gguf.py "$preset" "$quant" "/tmp/$f.gguf" &
done
gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --tokenizer qwen3 --out /tmp/qs | tail -1
wait $(jobs -p | grep -v "^$builder$")

if [[ -n $base ]]; then
  for f in llama8-Q4_0 llama8-Q4_K_M; do
    for binary in "$base" "$GERBIL"; do
      section "$binary on $f"
      timeout 90 stdbuf -oL "$binary" bench model --model "/tmp/$f.gguf" -p 512 -g 128 -d 0 -r 2 | rows
    done
  done
fi

section one sequence streamed through gerbil serve, and bench model on the same model
timeout 60 gerbil bench model --model /tmp/qs -p 16 -g 128 -d 0 -r 3 | grep -E "^tg128 "
gerbil serve --model /tmp/qs --port 8090 2>/tmp/serve.log &
server=$!
for _ in $(seq 60); do curl -sf localhost:8090/health >/dev/null && break; sleep 1; done
timeout 60 python3 bench/device/serve_stream.py http://127.0.0.1:8090 128 5
kill -INT $server; wait $server; echo "serve exit $?"

section waiting for the llama.cpp build
wait "$builder"
tail -4 /tmp/llama-build.log
for f in llama8-Q4_0 llama8-Q4_K_M qwen05-Q8_0 qwen05-Q4_K_M; do
  section "llama.cpp and gerbil on $f"
  timeout 100 bench/peers/llama_bench.sh "$llama_build" "/tmp/$f.gguf" -r 3 | sed -n '/^test /,$p'
done
section batched decoding, qwen05 F16
timeout 120 bench/peers/llama_batched_bench.sh "$llama_build" /tmp/qwen05-F16.gguf 1,4,16,64 | sed -n '/^sequences/,$p'
section long contexts, qwen05 F16
timeout 150 bench/peers/llama_depth_bench.sh "$llama_build" /tmp/qwen05-F16.gguf 8192 0,2048,8192 | sed -n '/^test /,$p'
section done
