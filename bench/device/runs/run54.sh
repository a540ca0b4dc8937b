#!/usr/bin/env bash
# H200 run 54 (session 7): gerbil-g = gerbil-f (the committed prompt kernel) with the decode kernel's
# stores indexing acc by min(lane, ROWS - 1); checks (selftest, GPU tests built from gerbil-g's code), the
# model's programs disassembled, models f -> g at depths 0 and 2048.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil-g selftest
step 90 test_graph_fixtures --gtest_brief=1
step 90 test_kernels_model --gtest_brief=1
step 40 test_generate_gpu_sampling --gtest_brief=1
step 30 test_gpu --gtest_brief=1
step 60 test_kernels_seed --gtest_brief=1
step 60 test_kernels_vector --gtest_brief=1
step 170 gerbil-g synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
mkdir -p /tmp/nvc
__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
  step 60 gerbil-g bench model --model /tmp/llama8 -r 1 -d 0
python3 bench/sass/disassemble_shader_cache.py /tmp/nvc /tmp/sass > $o/sass-log.txt 2>&1
python3 .device/s7/sass_summary.py /tmp/sass >> $o/log.txt 2>&1
for f in /tmp/sass/*_0001.sass; do grep -q "MUFU.SIN" $f && echo "rope: $f" >> $o/log.txt; done
tar czf $o/sass.tgz -C /tmp sass
for b in gerbil-f gerbil-g; do step 90 $b bench model --model /tmp/llama8 -r 3 -d 0 2048; done
step 30 gerbil-g synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-f gerbil-g gerbil-f gerbil-g; do step 40 $b bench model --model /tmp/qwen05 -d 0 2048; done
step 40 gerbil-f bench kernels --kernel linear --shape "qwen gate_up M=512" --iterations 30
step 40 gerbil-c bench kernels --kernel linear --shape "qwen gate_up M=512" --iterations 30
date >> $o/log.txt
grep -E "^==|^pp512|^tg128  |passed|PASSED|FAILED|rope|rc=[^0]" $o/log.txt | tail -60
