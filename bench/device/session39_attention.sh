#!/usr/bin/env bash
# The thirty-ninth session's sixth call (its log in $OUT/session39_attention.log): the machine code of the attention
# kernels at the last 512-token chunk of an 8,192-token prompt and at a decode step at depth 8,192 (`bench kernels
# --kernel attention`, Qwen2.5-0.5B's heads), in $OUT/sass-attention.tar.gz with bench/sass/sass_summary.py's lines:
# for the next session's work on long prompts (issue 22).
# Carry .device/{s39,lib,bin,debs,gpu-env.sh}.
#   bench/device/session39_attention.sh GERBIL
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session39_attention.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for shape in "prefill T=512 S=8192" "decode T=1 S=8192"; do
  section "$shape"
  machine_code_as sass-attention "$1" bench kernels --kernel attention --shape "$shape" --iterations 3 |
    grep -E "T=|^obj|programs from" | cut -c1-120
done
section done
