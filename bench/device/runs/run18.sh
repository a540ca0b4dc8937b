#!/usr/bin/env bash
# H200 run 18: the kernel table's other families (everything but linear), with the corrected FMA ceiling.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
end=$((SECONDS + 110))
for k in flash_attention linear_gptq gated_act rmsnorm_vec4 layernorm_welford mul_vec4 silu_vec4 add_vec4 gelu_vec4 embed qkv_rope_store; do
  left=$((end - SECONDS)); [ $left -lt 5 ] && break
  timeout $left gerbil bench kernels --kernel $k > $o/kernels_$k.txt 2>&1
done
date >> $o/log.txt
