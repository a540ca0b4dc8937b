#!/usr/bin/env bash
# H200 run 41 (session 5): decode with the RMSNorm fused into the next product (default) against a separate
# rmsnorm_vec4 dispatch before it (GERBIL_UNFUSE lists the norms left unfused; an experiment switch).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 170 gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/llama8
for u in "" "mlp_norm" "mlp_norm,final_norm" "attn_norm,mlp_norm,final_norm" ""; do echo "== GERBIL_UNFUSE=$u" >> $o/llama8.txt; GERBIL_UNFUSE=$u timeout 80 gerbil bench model --model /tmp/llama8 -r 3 -d 0 2048 >> $o/llama8.txt 2>>$o/log.txt; done
date >> $o/log.txt
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for u in "" "mlp_norm,final_norm" "attn_norm,mlp_norm,final_norm"; do echo "== GERBIL_UNFUSE=$u" >> $o/qwen05.txt; GERBIL_UNFUSE=$u timeout 45 gerbil bench model --model /tmp/qwen05 -d 0 >> $o/qwen05.txt 2>>$o/log.txt; done
GERBIL_UNFUSE="attn_norm,mlp_norm,final_norm" timeout 100 gerbil bench model --model /tmp/llama8 -r 1 -d 0 --profile > $o/llama8_profile_unfused.txt 2>>$o/log.txt
date >> $o/log.txt
