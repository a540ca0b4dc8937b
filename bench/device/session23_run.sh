#!/usr/bin/env bash
# The twenty-third session's H200 call: linear_q_matvec with each lane's quant and header words loaded a pass
# ahead of their use (gerbil-cand: two chunks a pass; gerbil-pass1: one) against main (gerbil-base): `bench kernels`
# on the decode shapes, blockings of both candidates, the registers of the candidate's programs, then `bench
# model` tg128 on random GGUF files of Llama-3-8B's shape (Q4_0, Q4_K_M) and Qwen2.5-0.5B's (Q8_0, Q4_K_M), each
# binary in turn.
#   bench/device/session23_run.sh BASE CAND PASS1   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs "${quant_files[@]}"
decode_products "${binaries[@]}"
for b in "${@:2}"; do
  section "blockings of $(basename "$b")"
  blockings=()
  for spec in 2,32,2 2,32,8 1,32,4 4,32,4 2,64,4 1,64,4 2,16,4; do blockings+=(--blocking "$spec"); done
  for shape in "llama down M=1 " "llama gate_up M=1 "; do
    timeout 200 "$b" bench kernels --kernel linear --shape "$shape" "${blockings[@]}" | grep -E "Q(4_[0K]|8_0) matvec c" | cut -c1-110
  done
done
section "registers of $(basename "$2")'s decode products"
machine_code "$2" bench kernels --kernel linear --shape "llama down M=1 " --iterations 3 > /dev/null
python3 bench/sass/sass_summary.py /tmp/sass | tail -6
wait
for f in "${quant_files[@]}"; do
  each "${f/:/ }" bench model --model "/tmp/${f/:/-}.gguf" -p 64 -g 128 -r 2
done
section done
