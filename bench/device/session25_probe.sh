#!/usr/bin/env bash
# The twenty-fifth session's first H200 call: a probe of linear_q_matvec (gerbil-probe, timing only: its values
# are wrong on the current layout) whose Q4_0 lanes each take 32 elements of a 256-element superblock with one
# 16-byte quant load, read x coalesced and the superblock's 8 scales in one load, against main (gerbil-base):
# `bench kernels` on the llama decode shapes, blockings of the probe, tg128 of a random Llama-3-8B-shaped Q4_0
# file (two rounds), and the registers and instructions of the probe's programs.
#   bench/device/session25_probe.sh BASE PROBE   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0
for b in "$@"; do
  section "decode products: $(basename "$b")"
  timeout 200 "$b" bench kernels --kernel linear --shape "llama" | grep -E "M=1 " | grep -E "Q4_0 matvec|f16 matvec" | cut -c1-110
done
section "blockings of $(basename "$2")"
blockings=()
for spec in 1,32,4 4,32,4 2,64,4 4,64,4; do blockings+=(--blocking "$spec"); done
for shape in "llama down M=1 " "llama gate_up M=1 "; do
  timeout 200 "$2" bench kernels --kernel linear --shape "$shape" "${blockings[@]}" | grep -E "Q4_0 matvec" | cut -c1-110
done
wait
rounds 2 "llama3-8b Q4_0" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 64 -g 128 -r 2
section "machine code of $(basename "$2")"
machine_code "$2" bench kernels --kernel linear --shape "llama down M=1 " --iterations 3 > /dev/null
python3 bench/sass/sass_summary.py /tmp/sass | tail -8
section done
