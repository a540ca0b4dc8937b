#!/usr/bin/env bash
# H200 run 20 (session 3): blocking sweep of the decode products, split-count sweep of the prompt products.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> $o/log.txt 2>&1
args=()
for c in 1 2 4; do for s in 1 2 4 8; do for u in 1 2 4 8; do args+=(--blocking $c,$s,$u); done; done; done
timeout 240 gerbil bench kernels --kernel linear --shape "M=1 " --iterations 40 "${args[@]}" > $o/decode_sweep.txt 2>&1
echo "decode rc=$?" >> $o/log.txt
timeout 200 gerbil bench kernels --kernel linear --shape "M=512" --split-parts 1 --split-parts 2 --split-parts 3 --split-parts 4 --split-parts 6 --split-parts 8 > $o/prefill_split.txt 2>&1
echo "prefill rc=$?" >> $o/log.txt
date >> $o/log.txt
