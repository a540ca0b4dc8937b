#!/usr/bin/env bash
# The figures of docs/PERFORMANCE.md's "Where things stand" tables for one gerbil binary, beside llama.cpp on the
# same random GGUF files, over as many calls on one warm device machine as they take: each section's report is kept
# in /tmp/standing/, so a call runs only the sections no earlier call on this machine finished, as many as fit in
# LIMIT (default 580) seconds, and then prints every report so far. Run it again until it says nothing is left.
# Sections: llama.cpp's build (.device/llama.cpp.tar.xz, in the background); the files (random_gguf.py: Qwen2.5-0.5B's
# shape in F16, Q8_0 and Q4_K_M, Llama-3-8B's in F16, Q4_0 and Q4_K_M); pp512 and tg128 on each
# (bench/peers/llama_bench.sh); batched decoding of the F16 files at 1 to 64 sequences (llama_batched_bench.sh);
# long contexts of the F16 files (llama_depth_bench.sh: pp8192 and tg128 at depths 0, 2,048 and 8,192; then
# tg128 at 32,768 after a 512-token prompt).
# ONLY, an extended regular expression, keeps the sections whose names match it (and makes only their files), e.g.
# ONLY='batched llama3-8b-F16|tg128 llama3-8b-Q4' for a call short of device time.
# Carry .device/{BINARY'S FOLDER,lib,debs,gpu-env.sh,llama.cpp.tar.xz}.
#   LIMIT=560 bench/device/standing.sh GERBIL
source "$(dirname "$0")/common.sh"
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
reports=/tmp/standing
mkdir -p $reports
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if ! [ -x /tmp/llama-build/bin/llama-bench ] && ! pgrep -f build_llama_cpp.sh > /dev/null; then
  section "llama.cpp's build (resumed where an earlier call left it)"
  start_llama_cpp_build
fi
q=qwen2.5-0.5b l=llama3-8b
selected() { [[ -z ${ONLY-} || $1 =~ $ONLY ]]; }  # selected NAME: whether section NAME is to run
kinds=("pp512 tg128" batched "depths to 8192" "depth 32768")  # each section's name is KIND FILE
wanted=()
for f in $q:F16 $q:Q8_0 $q:Q4_K_M $l:Q4_0 $l:Q4_K_M $l:F16; do
  for kind in "${kinds[@]}"; do
    selected "$kind ${f/:/-}" && { wanted+=("$f"); break; }
  done
done
missing_ggufs "${wanted[@]}" &
files=$!
ready() {  # ready FILE: waits until FILE.gguf is written (the writer runs in order, in the background)
  while ! [ -f "/tmp/$1.gguf" ] && kill -0 $files 2>/dev/null; do sleep 2; done
  [ -f "/tmp/$1.gguf" ]
}
run_section() {  # run_section NAME SECONDS FILE COMMAND...: COMMAND's comparison table into $reports/NAME, once
  # FILE.gguf and llama.cpp are ready, unless NAME's report is there already or SECONDS would not fit
  local name=$1 seconds=$2 file=$3
  shift 3
  selected "$name" || return 0
  sections=$((sections + 1))
  [ -s "$reports/$name" ] && return 0
  room "$seconds" && ready "$file" && llama_cpp_ready || return 0
  section "$name"
  timeout "$seconds" "$@" | peer_tables > "$reports/$name.part" && [ -s "$reports/$name.part" ] &&
    mv "$reports/$name.part" "$reports/$name"
  cat "$reports/$name.part" "$reports/$name" 2>/dev/null
}
sections=0
for f in $q-F16 $q-Q8_0 $q-Q4_K_M $l-Q4_0 $l-Q4_K_M $l-F16; do
  run_section "pp512 tg128 $f" 120 $f bench/peers/llama_bench.sh /tmp/llama-build /tmp/$f.gguf -r 3
done
for f in $q-F16 $l-F16; do
  run_section "batched $f" 150 $f bench/peers/llama_batched_bench.sh /tmp/llama-build /tmp/$f.gguf 1,4,16,32,64
done
for f in $q-F16 $l-F16; do
  run_section "depths to 8192 $f" 200 $f bench/peers/llama_depth_bench.sh /tmp/llama-build /tmp/$f.gguf 8192 0,2048,8192
  run_section "depth 32768 $f" 150 $f bench/peers/llama_depth_bench.sh /tmp/llama-build /tmp/$f.gguf 512 0,32768
done
section "reports so far"
for kind in "${kinds[@]}"; do
  for report in "$reports/$kind "*; do
    [[ $report == *.part ]] && continue
    [ -s "$report" ] && { echo "--- $(basename "$report")"; cat "$report"; }
  done
done
done_count=$(ls $reports | grep -v '\.part$' | while read -r name; do selected "$name" && echo; done | wc -l)
echo "$done_count of $sections sections done$([ "$done_count" -lt $sections ] && echo "; run again for the rest")"
