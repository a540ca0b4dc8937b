#!/usr/bin/env bash
# H200 run 75 (session 10): gerbil-t = gerbil-s + bench kernels' floor (an empty dispatch) and Llama-3-8B sizes
# for the bandwidth-bound token kernels. Run 73's whole-table run timed its last families 2-2.5x slow; run 74
# saw clocks steady. Here: the whole table with GPU memory, clocks and P-state logged; then each token family
# in a fresh process; then `--shape 2048` (heavy prompt products, then the T=2048 token shapes).
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
o=$OUT; date > $o/log.txt
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw,memory.used --format=csv -lms 200 > $o/smi.csv 2>&1 &
smi=$!
run() { local name=$1; shift; echo "== $(date +%T.%N) $name: $*" >> $o/log.txt; timeout 200 "$@" > $o/$name.txt 2>&1; echo "rc=$? $(date +%T.%N)" >> $o/log.txt; }
run all gerbil-t bench kernels
for k in embed gated_act qkv_rope_store rmsnorm_vec4 layernorm_welford add_vec4 mul_vec4 silu_vec4 gelu_vec4; do
  run fresh_$k gerbil-t bench kernels --kernel $k
done
run shape2048 gerbil-t bench kernels --shape 2048
sleep 1; kill $smi
cat $o/log.txt
