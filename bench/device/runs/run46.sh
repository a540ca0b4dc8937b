#!/usr/bin/env bash
# H200 run 46 (session 6): the tiled prompt kernel with its k loop written out, and the decode kernel's whole
# steps without per-piece tests (gerbil) against the committed code (gerbil-s5): selftest, kernel rows, qwen2.5-0.5b.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
mkdir -p /tmp/nvc
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
step 120 gerbil selftest
step 120 gerbil bench kernels --kernel linear --shape llama --blocking 0,0,2 --blocking 0,0,4
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass > /dev/null 2>&1; tar czf $o/sass.tgz -C /tmp sass
unset __GL_SHADER_DISK_CACHE_PATH
step 120 gerbil-s5 bench kernels --kernel linear --shape llama
step 60 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for i in 1 2; do
  step 60 gerbil-s5 bench model --model /tmp/qwen05 -d 0
  step 60 gerbil bench model --model /tmp/qwen05 -d 0
  GERBIL_EXPERIMENT_UNROLL=2 step 60 gerbil bench model --model /tmp/qwen05 -d 0
  GERBIL_EXPERIMENT_UNROLL=4 step 60 gerbil bench model --model /tmp/qwen05 -d 0
done
date >> $o/log.txt
grep -E "^==|pp512|tg128|passed|rc=" $o/log.txt | tail -60
