#!/usr/bin/env bash
# The twenty-first session's H200 diagnosis (one binary): (1) where a batched decode step's time goes (`bench model
# --batch 1,16,64 --profile` on random f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes); (2) linear_rows.wgsl
# at 16, 8 or 4 rows over its blockings (COLUMNS,LANES,UNROLL); (3) the machine code the NVIDIA driver made of the
# decode products (linear_rows at 16 rows, linear_q_matvec Q4_0, linear_matvec_sg f16) through bench/sass, with Dawn's
# own pipeline cache off so that the driver compiles (and caches) every program (the listings stay in /tmp/sass;
# a zstd binary in .device/bin, which the call carries, unpacks the driver's cache).
#   bench/device/session21_probe.sh GERBIL [profile] [sweep|sweep8|sweep4] [sass]   (from the project root)
source "$(dirname "$0")/common.sh"
g=$1; shift
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for part in "$@"; do case $part in
profile)
  section "batched steps, 0.5B f16"
  timeout 200 "$g" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q > /dev/null
  timeout 200 "$g" bench model --model /tmp/q -p 128 -g 32 --batch 1,16,64 --profile
  section "batched steps, 8B f16"
  timeout 200 "$g" synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l8 > /dev/null
  timeout 240 "$g" bench model --model /tmp/l8 -p 128 -g 16 --batch 16,64 --profile ;;
sweep|sweep8|sweep4)
  rows=${part#sweep}; rows=${rows:-16}
  section "linear_rows at $rows rows: blockings COLUMNS,LANES,UNROLL"
  blockings=()
  for c in 1 2 4; do for l in 8 16 32; do for u in 1 2 4; do blockings+=(--blocking "$c,$l,$u"); done; done; done
  timeout 300 "$g" bench kernels --kernel linear --shape "M=$rows " "${blockings[@]}" | grep -E "M=$rows " ;;
sass)
  section "decode products compiled by the driver, disassembled"
  machine_code "$g" bench kernels --kernel linear --shape "llama gate_up M=1" --iterations 3 \
    --blocking 4,8,1 --blocking 2,8,2 | grep -E "llama gate_up M=1(6)? " | cut -c1-100
  python3 bench/sass/sass_summary.py /tmp/sass | head -80 ;;
esac; done
section done
