#!/usr/bin/env bash
# H200 run 74 (session 10): why run 73's whole `bench kernels` timed the small kernels of its last families
# 2-2.5x slower than run 18's one-family runs (T=1 rows 17 us against 7). GPU clocks, P-state and memory
# logged every 100 ms beside three runs of gerbil-s: one family alone, the T=2048 token shapes, the T=1 ones.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,memory.used,clocks_throttle_reasons.active --format=csv -lms 100 > $o/smi.csv 2>&1 &
smi=$!
sleep 1
run() { local name=$1; shift; echo "== $(date +%T.%N) $name: $*" >> $o/log.txt; timeout 120 "$@" > $o/$name.txt 2>&1; echo "rc=$? $(date +%T.%N)" >> $o/log.txt; }
run gelu_alone gerbil-s bench kernels --kernel gelu_vec4
run t2048 gerbil-s bench kernels --shape "T=2048"
run t1 gerbil-s bench kernels --shape "T=1"
run gelu_alone2 gerbil-s bench kernels --kernel gelu_vec4
sleep 1; kill $smi
cat $o/log.txt
grep -h "gelu\|  add_vec4\|rmsnorm_vec4\|gated_act" $o/*.txt | cut -c1-110
