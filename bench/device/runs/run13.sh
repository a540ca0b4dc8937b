#!/usr/bin/env bash
# H200 run 13 (final): gerbil bench model beside transformers in the same call, both models.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $o/log.txt
step 30 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 90 gerbil bench model --model /tmp/qwen05 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 100 python3 bench/peers/transformers_bench.py --model /tmp/qwen05 > $o/qwen05_transformers.json 2>>$o/log.txt
step 160 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 110 gerbil bench model --model /tmp/llama8 -r 3 > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 130 python3 bench/peers/transformers_bench.py --model /tmp/llama8 --from-config --repeats 3 > $o/llama8_transformers.json 2>>$o/log.txt
date >> $o/log.txt
