#!/usr/bin/env bash
# Forty-ninth session's fourth call, on the machine the first three left warm (llama.cpp built in /tmp/llama-build,
# the F16 files in /tmp): (1) `bench kernels --kernel linear` at 12 rows, HEAD and CAND (session49_ab.sh's binaries;
# HEAD has no 12-row shapes, CAND's adds them); (2) llama.cpp and gerbil at depth 32,768 on the F16 files
# (bench/peers/llama_depth_bench.sh with a 512-token prompt). Sections that would run past LIMIT (default 580) seconds
# are skipped.
#   LIMIT=300 bench/device/session49_depth.sh HEAD CAND
source "$(dirname "$0")/common.sh"
export PATH=/usr/local/cuda/bin:$PATH GERBIL=$(realpath "$1")
for b in "$1" "$2"; do
  section "M=12 $b"
  timeout 40 "$b" bench kernels --kernel linear --shape "M=12 " | grep "M=12 " | grep -E "llama (gate_up|down)" |
    cut -c1-110
done
for f in /tmp/qwen2.5-0.5b-F16 /tmp/llama3-8b-F16; do
  room 110 && section "depth 32768 $f" &&
    timeout 140 bench/peers/llama_depth_bench.sh /tmp/llama-build $f.gguf 512 0,32768 | peer_tables
done
section done
