#!/usr/bin/env bash
# The fourteenth session's H200 call, everything to stdout (the device tool returns few files):
#  1. the adapter's tuning (GPU-timestamp probe), measured before anything else loads the machine;
#  2. gerbil alone on random f16 weights of Qwen2.5-0.5B's shape: decode at depths 0 / 2,048 / 8,192 with the f32
#     and f16 KV cache, pp8192 against pp512, sampled decoding, batched decoding;
#  3. llama.cpp (CUDA, flash attention; built here in the background from LLAMA_SRC, default .device/llama.cpp)
#     and gerbil on the same random-block GGUF files, file by file (bench/peers/llama_bench.sh);
#  4. decoding at depth 8,192 on two of those files with both engines. This llama-bench (February 2025) has no
#     depth option: its tg128 at depth 8,192 is derived from -pg 8192,128 less -p 8192 in the same run.
# Stage gerbil in .device/bin and Dawn in .device/lib; run with carry [".device"] (about 9 minutes).
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
export PATH=/usr/local/cuda/bin:$PATH GERBIL_CACHE_DIR=/tmp/gerbil-cache GERBIL=$(command -v gerbil)
llama_src=${1:-.device/llama.cpp}
llama_build=/tmp/llama-build
section() { echo; echo "=== $(date +%T) $*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
section tuning; gerbil tune

section f16 weights, qwen2.5-0.5b shape
gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q >/dev/null
for kv in f32 f16; do
  timeout 90 gerbil bench model --model /tmp/q -p 512 -g 128 -d 0 2048 8192 -r 3 --ctx 8448 --kv-cache $kv \
    --sampling "temperature=0.7,top_k=40,top_p=0.95,min_p=0.05"
done
timeout 60 gerbil bench model --model /tmp/q -p 8192 -g 16 -d 0 -r 2 --ctx 8448
timeout 90 gerbil bench model --model /tmp/q -p 128 -g 128 --batch 1,4,8,16,32,64

section llama.cpp build in the background, GGUF files
(JOBS=$(( $(nproc) - 2 )) nice -n 10 bench/peers/build_llama_cpp.sh "$llama_src" "$llama_build" \
   >/tmp/llama-build.log 2>&1; echo "build exit $?" >>/tmp/llama-build.log) &
builder=$!
files=(llama8-Q4_0 qwen05-Q8_0 qwen05-Q4_K_M llama8-Q4_K_M)
for f in "${files[@]}"; do
  preset=${f%%-*}; quant=${f#*-}
  [[ $preset == llama8 ]] && preset=llama3-8b || preset=qwen2.5-0.5b
  python3 bench/device/random_gguf.py "$preset" "$quant" "/tmp/$f.gguf"
done
wait "$builder"
tail -2 /tmp/llama-build.log

for f in "${files[@]}"; do
  section "llama.cpp and gerbil on $f"
  timeout 150 bench/peers/llama_bench.sh "$llama_build" "/tmp/$f.gguf" -r 3 | sed -n '/^test /,$p'
done

for f in qwen05-Q8_0 llama8-Q4_0; do
  section "depth 8192 on $f"
  timeout 120 gerbil bench model --model "/tmp/$f.gguf" -p 512 -g 128 -d 0 8192 -r 2 --ctx 8448
  timeout 120 "$llama_build/bin/llama-bench" -m "/tmp/$f.gguf" -p 8192 -n 0 -pg 8192,128 -fa 1 -ngl 99 -r 2 -o json \
    >/tmp/depth.json && python3 - /tmp/depth.json <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
pp = next(r for r in runs if r["n_gen"] == 0)
pg = next(r for r in runs if r["n_gen"] > 0)
seconds = lambda r: (r["n_prompt"] + r["n_gen"]) / r["avg_ts"]
decode = seconds(pg) - seconds(pp)
print(f"llama.cpp pp8192 {pp['avg_ts']:.1f} tok/s; tg128 @ d8192 (pg8192,128 less pp8192) {pg['n_gen'] / decode:.1f} tok/s")
PY
done
section done
