#!/usr/bin/env bash
# H200 run 57 (session 7, review): gerbil-j = gerbil-i with the tiling geometry shared by linear_tiled.wgsl and
# linear_split_sum.wgsl (linear_shares.wgsl's tiling() / tile_corner()); same arithmetic. Checked and timed
# against gerbil-i.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-j selftest --kernel linear
mkdir -p /tmp/nvc
__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
  step 60 gerbil-j bench kernels --kernel linear --shape "llama gate_up M=512" --iterations 5
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass > $o/sass-log.txt 2>&1
python3 .device/s7/sass_summary.py /tmp/sass >> $o/log.txt 2>&1
for b in gerbil-i gerbil-j; do step 80 $b bench kernels --kernel linear --shape "M=512" --iterations 30; done
date >> $o/log.txt
grep -E "^==|passed|regs 128|f16 tiled split|rc=[^0]" $o/log.txt | tail -40
