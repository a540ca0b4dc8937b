#!/usr/bin/env bash
# H200 run 38 (session 4, final binary): qwen2.5-0.5b, gerbil-s3 (04f07f8) then gerbil, and gerbil's profile.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s3 gerbil; do echo "== $b" >> $o/qwen05.txt; timeout 50 $b bench model --model /tmp/qwen05 -d 0 2048 >> $o/qwen05.txt 2>>$o/log.txt; done
timeout 60 gerbil bench model --model /tmp/qwen05 -d 0 2048 -r 1 --profile > $o/qwen05_profile.txt 2>>$o/log.txt
date >> $o/log.txt
