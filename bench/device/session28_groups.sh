#!/usr/bin/env bash
# The twenty-eighth session's first H200 call: linear_q_matvec.wgsl with the first pass's words loaded before x is
# staged (`prefetch`), and that with a workgroup serving two column groups in turn over one staging of x where x
# fits one segment (`groups`; its --blocking's fourth field sets the groups), against main (the first binary).
# The driver's machine code (registers) of each binary's Llama-3-8B gate_up product; `bench kernels` on the 8B's
# decode shapes at M = 1 (main also with Dawn's workgroup memory left uninitialised: disable_workgroup_init); tg128
# of random 8B Q4_0 and Q4_K_M files, two rounds in turn.
#   bench/device/session28_groups.sh BASE PREFETCH GROUPS   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M
for b in "${binaries[@]}"; do
  section "machine code: $(basename "$b") llama gate_up M=1"
  rm -rf /tmp/nvc /tmp/sass
  machine_code "$b" bench kernels --kernel linear --shape "llama gate_up M=1 " --iterations 2 > /dev/null
  python3 bench/sass/sass_summary.py /tmp/sass | grep -iE "q_matvec|regist|program" | head -20
done
linear_products "Q4_(0|K)" "llama gate_up M=1 " "llama down M=1 " "llama qkv M=1 " "llama o M=1 "
section "$(basename "$1") gate_up, workgroup memory uninitialised"
timeout 200 "$1" bench kernels --kernel linear --shape "llama gate_up M=1 " --toggle disable_workgroup_init |
  grep -E "Q4_(0|K) matvec" | cut -c1-120
binaries=("$3")
blockings=(--blocking 4,32,1,1 --blocking 4,32,1,2 --blocking 4,32,1,3 --blocking 4,32,1,4 --blocking 2,32,2,2)
linear_products "Q4_(0|K)" "llama gate_up M=1 "
binaries=("$@")
blockings=()
wait
for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M; do
  rounds 2 "$f" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0
done
section done
