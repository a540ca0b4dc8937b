#!/usr/bin/env bash
# H200 run 23 (session 3): decode blocking sweep with cold weights (copies read in turn, 256 MiB in all).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
args=()
for b in 1,1,1 1,1,2 1,2,1 1,2,2 1,2,4 1,4,1 1,4,2 1,4,4 1,8,1 1,8,2 1,1,4 1,8,4 \
         2,1,1 2,1,2 2,1,4 2,1,8 2,2,1 2,2,2 2,2,4 2,2,8 2,4,2 2,4,4 2,4,8 2,1,1; do args+=(--blocking $b); done
timeout 500 gerbil bench kernels --kernel linear --shape "M=1 " --iterations 30 "${args[@]}" > $o/decode_sweep_cold.txt 2>&1
echo "rc=$?" >> $o/log.txt; date >> $o/log.txt
