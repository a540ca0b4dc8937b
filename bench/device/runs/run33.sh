#!/usr/bin/env bash
# H200 run 33 (session 4, 04f07f8 + --toggle for bench kernels): the GPU sampler's tests (penalties) on the
# H200; what Dawn's robustness costs each product (bench kernels with and without disable_robustness); the
# toggles on qwen2.5-0.5b.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures PYTHONUNBUFFERED=1
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 90 gerbil selftest --kernel sample -v
step 60 test_generate_gpu_sampling
k() { local name=$1; shift; timeout 90 gerbil bench kernels --kernel linear "$@" > $o/$name.txt 2>&1; }
k kernels_prefill --shape "M=512"
k kernels_prefill_norobust --shape "M=512" --toggle disable_robustness
k kernels_decode_norobust --shape "M=1 " --toggle disable_robustness
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
m() { echo "== toggles: $*" >> $o/qwen05_toggles.txt; timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 "$@" >> $o/qwen05_toggles.txt 2>>$o/log.txt; }
m
m --toggle disable_robustness
m --toggle skip_validation
m --toggle disable_workgroup_init
m --toggle disable_robustness --toggle skip_validation --toggle disable_workgroup_init
m
date >> $o/log.txt
