#!/usr/bin/env bash
# One H200 device call (issue 20): batched decode steps of 5-16 rows through linear_rows.wgsl against the tiled
# prompt kernel they replace. .device/h-smallm2/gerbil is this branch's build, .device/h-smallm2/gerbil-main main's
# (the same-call baseline); bench model --batch on random f16 Llama-3-8B and Qwen2.5-0.5B weights, and bench
# kernels' Llama projections at 16 rows (linear_rows) and 17 and 32 rows (the tiled kernel, whose 64-row tiles cost
# about the same at any M <= 64). Run through the device tool with carry [".device"], the binaries staged there.
cd "$(dirname "$0")/../.." 2>/dev/null || true
source .device/gpu-env.sh
o=${OUT:-/tmp}
new=.device/h-smallm2/gerbil main=.device/h-smallm2/gerbil-main
step() {  # NAME TIMEOUT COMMAND...: into $o/NAME.txt, echoed
  local name=$1 t=$2; shift 2
  echo "== $name: $* ($(date +%T))"
  timeout "$t" "$@" > "$o/$name.txt" 2>&1 || echo "== $name failed ($?)"
  cat "$o/$name.txt"
}
date
step synth_l8 70 $new synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l8
step l8_rows 45 $new bench model --model /tmp/l8 -p 128 -g 128 --batch 1,4,8,16,32,64
[ -x $main ] && step l8_main 45 $main bench model --model /tmp/l8 -p 128 -g 128 --batch 4,8,16,32
step k16 15 $new bench kernels --kernel linear --shape "M=16 K" --iterations 10
step k17 15 $new bench kernels --kernel linear --shape "M=17 K" --iterations 10
step k32 15 $new bench kernels --kernel linear --shape "M=32 K" --iterations 10
step synth_q 20 $new synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q
step q_rows 20 $new bench model --model /tmp/q -p 128 -g 128 --batch 1,4,16,64
[ -x $main ] && step q_main 20 $main bench model --model /tmp/q -p 128 -g 128 --batch 1,4,16,64
date
