# Sourced by the H200 scripts of bench/device (from the project root, as they are run): Dawn and the Vulkan
# loader staged as .device/gpu-env.sh expects, a kernel cache of the call's own, and the helpers that label
# sections by the seconds since the start, keep the rows of `gerbil bench model` (of each binary in turn: each;
# in several rounds: rounds), write random GGUF files (random_ggufs), stream through `gerbil serve` (streams) and
# load it with many clients (under_load).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source .device/gpu-env.sh
export GERBIL_CACHE_DIR=/tmp/gerbil-cache PYTHONUNBUFFERED=1
t0=$(date +%s)
section() { echo; echo "=== [$(( $(date +%s) - t0 )) s] $*"; }
room() {  # room SECONDS: whether SECONDS more fit before LIMIT (default 580) seconds since the start; says so if not
  (( $(date +%s) - t0 + $1 <= ${LIMIT:-580} )) && return 0
  echo "--- skipped: $1 s do not fit in LIMIT=${LIMIT:-580} s"
  return 1
}
rows() { grep -E "^(pp|tg|load|model:|time to|warm|[0-9]+ )"; }
each() {  # each LABEL ARGS...: every binary of the array `binaries` in turn, one run each, its rows kept
  local label=$1; shift
  for b in "${binaries[@]}"; do
    section "$label: $(basename "$b") $*"
    timeout 240 "$b" "$@" | rows
  done
}
rounds() {  # rounds N LABEL ARGS...: `each` N times over, the binaries taking turns, so that drift within a call
  # falls on all of them alike
  local n=$1 label=$2 round
  shift 2
  for ((round = 1; round <= n; round++)); do each "$label (round $round)" "$@"; done
}
missing_ggufs() {  # missing_ggufs SHAPE:TYPE ...: /tmp/SHAPE-TYPE.gguf of each not yet on this machine, in turn
  # (written under another name first, so that a call cut short leaves no partial file behind for the next)
  local f out
  for f in "$@"; do
    out="/tmp/${f/:/-}.gguf"
    [ -f "$out" ] || { python3 bench/device/random_gguf.py "${f%%:*}" "${f#*:}" "$out.part" && mv "$out.part" "$out"; }
  done
}
random_ggufs() {  # random_ggufs SHAPE:TYPE ...: missing_ggufs in the background
  missing_ggufs "$@" &
}
f16_models() {  # f16_models GERBIL qwen|llama ...: random f16 weights (gerbil synth, seed 1) of Qwen2.5-0.5B's shape
  # in /tmp/q, of Llama-3-8B's in /tmp/l8
  local g=$1 shape
  shift
  for shape in "$@"; do case $shape in
    qwen) "$g" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q > /dev/null ;;
    llama) "$g" synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l8 > /dev/null ;;
  esac; done
}
# The random GGUF files the decode-product calls time: Llama-3-8B's shape in Q4_0 and Q4_K_M, Qwen2.5-0.5B's in
# Q8_0 and Q4_K_M.
quant_files=(llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q8_0 qwen2.5-0.5b:Q4_K_M)
decode_products() {  # decode_products BINARY...: `bench kernels` on every decode (M = 1) shape, block and f16 rows
  for b in "$@"; do
    section "decode products: $(basename "$b")"
    timeout 200 "$b" bench kernels --kernel linear --shape "M=1 " | grep -E "M=1 " |
      grep -E "Q[0-9]_[0-9KG] matvec|f16 matvec +(llama|qwen)" | cut -c1-110
  done
}
machine_code() {  # machine_code COMMAND...: machine_code_as sass COMMAND... (listings in $OUT/sass.tar.gz)
  machine_code_as sass "$@"
}
machine_code_as() {  # machine_code_as NAME COMMAND...: runs it (a gerbil binary's bench) with Dawn's pipeline cache
  # off, so that the driver compiles every program into its own cache (/tmp/nvc-NAME; calls with one NAME add to
  # it), then disassembles that cache into /tmp/NAME (bench/sass; nvdisasm from CUDA, zstd carried in
  # .device/bin), prints bench/sass/sass_summary.py's line for each program and tars the listings into
  # $OUT/NAME.tar.gz
  local name=$1
  shift
  mkdir -p "/tmp/nvc-$name"
  (export PATH="$PATH:/usr/local/cuda/bin:$PWD/.device/bin"
   export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH="/tmp/nvc-$name" __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
   GERBIL_CACHE_DIR=off timeout 150 "$@"
   python3 bench/sass/disassemble_shader_cache.py "/tmp/nvc-$name" "/tmp/$name" 2>&1 | tail -1
   python3 bench/sass/sass_summary.py "/tmp/$name")
  tar czf "${OUT:-/tmp}/$name.tar.gz" -C /tmp "$name"
}
linear_products() {  # linear_products PATTERN SHAPE...: `bench kernels --kernel linear` of every binary of the array
  # `binaries` on each shape (at the blockings of the array `blockings`, where set), the rows of the block types
  # PATTERN matches (e.g. "Q4_(0|K)")
  local pattern=$1 b shape
  shift
  for b in "${binaries[@]}"; do
    for shape in "$@"; do
      section "$(basename "$b"): $shape"
      timeout 200 "$b" bench kernels --kernel linear --shape "$shape" ${blockings[@]+"${blockings[@]}"} |
        grep -E "$pattern matvec" | cut -c1-120
    done
  done
}
start_llama_cpp_build() {  # llama.cpp's source from .device/llama.cpp.tar.xz, built into /tmp/llama-build on all cores
  # but two, niced, in the background (bench/peers/build_llama_cpp.sh; its log /tmp/llama-build.log); `builder` is
  # its job's pid, for `wait "$builder"`. An earlier call's build on this machine is taken up where it stopped (the
  # archive keeps its files' times, so what was built stays built).
  tar -C /tmp -xJf .device/llama.cpp.tar.xz
  (JOBS=$(( $(nproc) - 2 )) nice -n 10 bench/peers/build_llama_cpp.sh /tmp/llama.cpp /tmp/llama-build \
     >/tmp/llama-build.log 2>&1; echo "build exit $?" >>/tmp/llama-build.log) &
  builder=$!
}
llama_cpp_ready() {  # waits for llama.cpp's build in /tmp/llama-build: this call's, one an earlier call on this
  # machine left running, or one it starts if there is none; prints how the build ended, fails if it did
  [ -x /tmp/llama-build/bin/llama-bench ] && return 0
  pgrep -f build_llama_cpp.sh > /dev/null || start_llama_cpp_build
  section "waiting for llama.cpp's build"
  while pgrep -f build_llama_cpp.sh > /dev/null; do sleep 5; done
  tail -2 /tmp/llama-build.log
  [ -x /tmp/llama-build/bin/llama-bench ]
}
peer_tables() {  # the comparison tables of bench/peers' scripts (test or sequence count, both rates, the ratio),
  # without the raw reports printed before them
  grep -E '^(test |sequences|pp[0-9]|tg[0-9]| +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$|.* missing from )'
}
streams() {  # streams BINARY MODEL SCHEMA...: one sequence streamed through BINARY's `gerbil serve` of MODEL
  # (serve_stream.py, 128 tokens, median of 5), unconstrained, then constrained to each JSON schema given
  local binary=$1 model=$2 server schema
  shift 2
  section "one sequence through serve, unconstrained and constrained: $(basename "$binary")"
  "$binary" serve --model "$model" --port 8090 2>/tmp/serve.log &
  server=$!
  for i in $(seq 60); do curl -sf localhost:8090/health > /dev/null && break; sleep 1; done
  timeout 60 python3 bench/device/serve_stream.py http://127.0.0.1:8090 128 5 | tail -1
  for schema in "$@"; do
    timeout 60 python3 bench/device/serve_stream.py http://127.0.0.1:8090 128 5 "$schema" | tail -1
  done
  kill -INT $server
  wait $server
}
qwen_with_tokenizer() {  # qwen_with_tokenizer GERBIL: random f16 weights of Qwen2.5-0.5B's shape with the qwen3
  # tokenizer (carried in .device/tokenizers) in /tmp/qs, which `streams` and `under_load` serve
  mkdir -p /tmp/tokenizers && tar -C /tmp/tokenizers -xJf .device/tokenizers/qwen3.tar.xz
  "$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --tokenizer /tmp/tokenizers/qwen3 --out /tmp/qs > /dev/null
}
under_load() {  # under_load BINARY METRICS ARGS...: BINARY's `gerbil serve --parallel 64` of /tmp/qs, warmed up (one
  # round of 64 clients, 8 tokens each), then bench/device/serve_load.py URL 64 ARGS...; the /metrics lines that
  # match the pattern METRICS before and after
  local binary=$1 metrics=$2 server
  shift 2
  "$binary" serve --model /tmp/qs --port 8091 --parallel 64 2>/tmp/serve.log &
  server=$!
  for i in $(seq 60); do curl -sf localhost:8091/health > /dev/null && break; sleep 1; done
  timeout 60 python3 bench/device/serve_concurrent.py http://127.0.0.1:8091 64 8 > /dev/null
  curl -s localhost:8091/metrics | grep -E "$metrics"
  timeout 80 python3 bench/device/serve_load.py http://127.0.0.1:8091 64 "$@"
  curl -s localhost:8091/metrics | grep -E "$metrics"
  kill -INT $server
  wait $server
}
