#!/usr/bin/env bash
# One H200 device call (issue 20, helper h-batch, 2026-12-02): batched decoding, main against the branch in the same call.
# .device/h-batch/gerbil-main is main's build (78a61c0), .device/h-batch/gerbil the branch's; bench model --batch on random f16
# Qwen2.5-0.5B (-g 128) and Llama-3-8B (-g 32) weights, the branch with --profile (each count's batched step timed
# dispatch by dispatch), bench kernels' products at 16 and 32 rows, and pp50 (the 64-row tile rule reaches prompts of
# up to 64 tokens). Run through the device tool with carry [".device/lib", ".device/debs", ".device/gpu-env.sh",
# ".device/h-batch"].
source .device/gpu-env.sh
d=.device/h-batch
export GERBIL_CACHE_DIR=/tmp/gc
o=$OUT
# step FILE TIMEOUT CMD...: appends the command's output to $o/FILE
step() { local f=$1 t=$2; shift 2; echo "== $(date +%T): $*" | tee -a $o/$f; timeout $t "$@" >> $o/$f 2>&1; echo "rc=$? $(date +%T)" | tee -a $o/$f; }
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step log.txt 30 $d/gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q
step log.txt 20 $d/gerbil tune
step q_main.txt 30 $d/gerbil-main bench model --model /tmp/q -p 128 -g 128 --batch 1,4,8,16,32,64
step q_branch.txt 30 $d/gerbil bench model --model /tmp/q -p 128 -g 128 --batch 1,4,8,16,32,64 --profile
grep -B1 -A8 "^sequences" $o/q_main.txt $o/q_branch.txt
step log.txt 40 $d/gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l8
step l8_main.txt 45 $d/gerbil-main bench model --model /tmp/l8 -p 128 -g 32 --batch 1,4,8,16,32,64
step l8_branch.txt 45 $d/gerbil bench model --model /tmp/l8 -p 128 -g 32 --batch 1,4,8,16,32,64 --profile
grep -A7 "^sequences" $o/l8_main.txt $o/l8_branch.txt
for b in gerbil-main gerbil; do for m in 16 32; do step kernels_$b.txt 25 $d/$b bench kernels --kernel linear --shape "M=$m K" --iterations 10; done; done
grep -hE "== |M=(16|32) K" $o/kernels_*.txt | cut -c1-125
for b in gerbil-main gerbil; do step pp.txt 20 $d/$b bench model --model /tmp/q -p 50 -g 4 -d 0 -r 5; done
grep -E "^== |^pp" $o/pp.txt
date
