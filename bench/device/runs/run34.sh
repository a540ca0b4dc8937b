#!/usr/bin/env bash
# H200 run 34 (session 4): the toggles on llama3-8b (default, robustness off, all three), depth 0 and 2048.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
m() { echo "== toggles: $*" >> $o/llama8_toggles.txt; timeout 150 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048 "$@" >> $o/llama8_toggles.txt 2>>$o/log.txt; echo "rc=$?" >> $o/log.txt; }
m
m --toggle disable_robustness
m --toggle disable_robustness --toggle skip_validation --toggle disable_workgroup_init
date >> $o/log.txt
