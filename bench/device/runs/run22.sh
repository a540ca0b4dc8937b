#!/usr/bin/env bash
# H200 run 22 (session 3): the new decode blocking and prompt split rules (gerbil) against the previous
# session's binary (gerbil-s2) on the same models; x staged in workgroup memory (kernel rows).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; }
step 60 gerbil selftest
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 --profile > $o/qwen05_gerbil.txt 2>>$o/log.txt
timeout 40 gerbil-s2 bench model --model /tmp/qwen05 -d 0 > $o/qwen05_s2.txt 2>>$o/log.txt
b=(--blocking 2,1,1,1 --blocking 2,1,1,2 --blocking 1,2,1,1 --blocking 1,2,1,2 --blocking 1,4,1,1 --blocking 1,4,1,2 --blocking 2,1,1,1 --blocking 2,1,1,2)
timeout 150 gerbil bench kernels --kernel linear --shape "M=1 " --iterations 100 "${b[@]}" > $o/kernels_decode_staging.txt 2>&1
step 160 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
timeout 60 gerbil bench model --model /tmp/llama8 -r 3 -d 0 --profile > $o/llama8_gerbil.txt 2>>$o/log.txt
timeout 50 gerbil-s2 bench model --model /tmp/llama8 -r 3 -d 0 > $o/llama8_s2.txt 2>>$o/log.txt
date >> $o/log.txt
