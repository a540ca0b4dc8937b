#!/usr/bin/env bash
# H200 run 21 (session 3): the decode blocking sweep again, with warm-up until timings are steady.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
args=()
for c in 1 2 4; do for s in 1 2 4 8; do for u in 1 2 4 8; do args+=(--blocking $c,$s,$u); done; done; done
timeout 400 gerbil bench kernels --kernel linear --shape "M=1 " --iterations 50 "${args[@]}" > $o/decode_sweep.txt 2>&1
echo "decode rc=$?" >> $o/log.txt
date >> $o/log.txt
