#!/usr/bin/env bash
# H200 run 47 (session 6): the tiled prompt kernel written out with [buffer][k][slot] workgroup arrays, and decode
# products that fuse a norm at UNROLL 2 / 4 (GERBIL_EXPERIMENT_UNROLL), against the committed code (gerbil-s5).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
mkdir -p /tmp/nvc
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
step 120 gerbil bench kernels --kernel linear --shape "M=512" --iterations 20
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass > /dev/null 2>&1; tar czf $o/sass.tgz -C /tmp sass
unset __GL_SHADER_DISK_CACHE_PATH
step 120 gerbil-s5 bench kernels --kernel linear --shape "M=512" --iterations 20
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
step 60 gerbil-s5 bench model --model /tmp/llama8 -r 3 -d 0
step 60 gerbil bench model --model /tmp/llama8 -r 3 -d 0
GERBIL_EXPERIMENT_UNROLL=4 step 60 gerbil bench model --model /tmp/llama8 -r 3 -d 0
GERBIL_EXPERIMENT_UNROLL=2 step 60 gerbil bench model --model /tmp/llama8 -r 3 -d 0
step 30 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
step 40 gerbil-s5 bench model --model /tmp/qwen05 -d 0
step 40 gerbil bench model --model /tmp/qwen05 -d 0
GERBIL_EXPERIMENT_UNROLL=4 step 40 gerbil bench model --model /tmp/qwen05 -d 0
GERBIL_EXPERIMENT_UNROLL=2 step 40 gerbil bench model --model /tmp/qwen05 -d 0
step 40 gerbil-s5 bench model --model /tmp/qwen05 -d 0
step 40 gerbil bench model --model /tmp/qwen05 -d 0
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |rc=[^0]" $o/log.txt | tail -40
