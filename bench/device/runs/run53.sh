#!/usr/bin/env bash
# H200 run 53 (session 7): gerbil-f = gerbil-e with the prompt kernel's loads unconditional (row starts clamped, the last slab reloaded)
# against gerbil-c (session 6's final code, 8c11513): correctness, registers, kernels, models.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv >> $o/log.txt 2>&1
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 60 gerbil-f selftest --kernel linear
mkdir -p /tmp/nvc
__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
  step 60 gerbil-f bench kernels --kernel linear --shape "gate_up M=512" --iterations 5
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass > $o/sass-log.txt 2>&1
python3 .device/s7/sass_summary.py /tmp/sass >> $o/log.txt 2>&1
tar czf $o/sass.tgz -C /tmp sass
step 80 gerbil-f bench kernels --kernel linear --shape "M=512" --iterations 30
step 60 gerbil-c bench kernels --kernel linear --shape "M=512" --iterations 30
step 170 gerbil-c synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for b in gerbil-c gerbil-e gerbil-f; do step 50 $b bench model --model /tmp/llama8 -r 3 -d 0; done
step 30 gerbil-c synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-c gerbil-f gerbil-c gerbil-f; do step 30 $b bench model --model /tmp/qwen05 -d 0; done
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|regs|rc=[^0]" $o/log.txt | tail -40
