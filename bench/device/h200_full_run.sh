#!/usr/bin/env bash
# One H200 device call: correctness (selftest, fixture models), model benchmarks with profiles and transformers
# beside them, the kernel table. Stage first (../shared/device/stage.sh, binaries in .device/bin, Dawn in
# .device/lib, fixtures in .device/fixtures), then run it through the device tool with carry [".device"].
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $o/log.txt
step 30 gerbil info
step 90 gerbil selftest
step 60 test_graph_fixtures --gtest_brief=1
step 60 test_kernels_model --gtest_brief=1
step 30 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 120 gerbil bench model --model /tmp/qwen05 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
echo "== --toggle disable_robustness" >> $o/qwen05_gerbil.txt
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 --toggle disable_robustness >> $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 60 gerbil bench model --model /tmp/qwen05 --json > $o/qwen05_gerbil.json 2>>$o/log.txt
timeout 90 python3 bench/peers/transformers_bench.py --model /tmp/qwen05 > $o/qwen05_transformers.json 2>>$o/log.txt
timeout 330 gerbil bench kernels > $o/kernels.txt 2>&1
step 200 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 150 gerbil bench model --model /tmp/llama8 -r 3 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
echo "== --toggle disable_robustness" >> $o/llama8_gerbil.txt
timeout 60 gerbil bench model --model /tmp/llama8 -r 3 -d 0 --toggle disable_robustness >> $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 120 python3 bench/peers/transformers_bench.py --model /tmp/llama8 --from-config --repeats 3 > $o/llama8_transformers.json 2>>$o/log.txt
date >> $o/log.txt
