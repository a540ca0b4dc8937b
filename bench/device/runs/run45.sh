#!/usr/bin/env bash
# H200 run 45 (session 6): the driver's shader cache for the llama-shape linear kernels, disassembled.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv >> $o/log.txt 2>&1
mkdir -p /tmp/nvc
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
timeout 240 gerbil bench kernels --kernel linear --shape llama --iterations 5 > $o/bench.txt 2>&1; echo "bench rc=$?" >> $o/log.txt
ls -laR /tmp/nvc >> $o/log.txt 2>&1; ls ~/.cache/nvidia 2>&1 >> $o/log.txt
tar czf $o/cache.tgz -C /tmp nvc
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass >> $o/log.txt 2>&1
ls -la /tmp/sass | head -100 >> $o/log.txt
tar czf $o/sass.tgz -C /tmp sass
date >> $o/log.txt
