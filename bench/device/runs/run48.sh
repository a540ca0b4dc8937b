#!/usr/bin/env bash
# H200 run 48 (session 6): the tiled prompt kernel written out, with [buffer][k][slot] workgroup arrays: with the
# XOR swizzle (gerbil-a, run 47's) and without it (gerbil-b), against the committed code (gerbil-s5).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
mkdir -p /tmp/nvc
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
step 100 gerbil-b bench kernels --kernel linear --shape "M=512" --split-parts 1 --split-parts 2 --split-parts 4 --iterations 30
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass > /dev/null 2>&1; tar czf $o/sass.tgz -C /tmp sass
unset __GL_SHADER_DISK_CACHE_PATH
step 100 gerbil-s5 bench kernels --kernel linear --shape "M=512" --split-parts 1 --split-parts 2 --split-parts 4 --iterations 30
step 100 gerbil-a bench kernels --kernel linear --shape "M=512" --split-parts 1 --split-parts 2 --split-parts 4 --iterations 30
step 170 gerbil-b synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-s5 gerbil-a gerbil-b; do step 60 $b bench model --model /tmp/llama8 -r 3 -d 0; done
step 30 gerbil-b synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s5 gerbil-a gerbil-b gerbil-s5 gerbil-a gerbil-b; do step 40 $b bench model --model /tmp/qwen05 -d 0; done
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |rc=[^0]" $o/log.txt | tail -40
