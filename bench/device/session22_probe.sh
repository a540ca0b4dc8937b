#!/usr/bin/env bash
# The twenty-second session's diagnosis of the 4-bit decode products (linear_q_matvec.wgsl at M = 1), which run at
# about 2.2e12 weights a second whatever the format. Each binary is a build of the kernel with some of its costs
# removed (results wrong, time telling): gerbil-nodecode decodes no quants (a word's bits taken as a float),
# gerbil-now loads no quants, gerbil-nox reads no x, gerbil-now-nox neither, gerbil-noloads loads nothing in its
# loop (no headers either). Then blockings of the unchanged kernel (COLUMNS,TEAM,CHUNK_LANES),
# and the machine code the NVIDIA driver made of it (bench/sass; Dawn's pipeline cache off; a zstd binary carried
# in .device/bin), tarred into $OUT.
#   bench/device/session22_probe.sh [--variants-only] BASE [VARIANT...]   (from the project root)
source "$(dirname "$0")/common.sh"
detail=1
if [ "$1" = --variants-only ]; then detail=0; shift; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
decode_rows() { grep -E "(Q4_0|Q4_K|Q8_0|Q6_K) matvec( c[0-9]| +llama)|f16 matvec +llama" | cut -c1-110; }
for b in "$@"; do
  for shape in "llama down M=1 " "llama gate_up M=1 "; do
    section "$(basename "$b"): $shape"
    timeout 150 "$b" bench kernels --kernel linear --shape "$shape" | decode_rows
  done
done
[ $detail = 1 ] || { section done; exit 0; }
section "blockings of $(basename "$1")"
blockings=()
for spec in 2,32,1 2,32,2 2,32,8 1,32,4 4,32,4 2,64,4 2,16,4 1,16,4 4,16,4 2,128,4; do blockings+=(--blocking "$spec"); done
timeout 200 "$1" bench kernels --kernel linear --shape "llama down M=1 " "${blockings[@]}" | grep -E "Q4_[0K] matvec" | cut -c1-110
section "machine code of $(basename "$1")"
machine_code "$1" bench kernels --kernel linear --shape "llama down M=1 " --iterations 3 | decode_rows
python3 bench/sass/sass_summary.py /tmp/sass | head -40
section done
