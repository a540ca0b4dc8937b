#!/usr/bin/env bash
# The twenty-sixth session's first H200 call, main only (the first binary): linear_q_matvec's blockings since it
# takes whole chunks a lane with x staged (`bench kernels` on Llama-3-8B's four decode shapes, Q4_0 and Q4_K, every
# COLUMNS,TEAM,IN_FLIGHT of 1-4 columns, teams of 32-128 lanes and 1-2 chunks in flight); tg128 of random Llama-3-8B
# Q4_0 and Q4_K_M files with and without Dawn's disable_robustness toggle (bounds checks off), two rounds; and
# tg128 of a random Qwen2.5-0.5B F16 file greedy and with three sampling settings (issue 22's within-10 % rows).
#   bench/device/session26_sweep.sh BINARY   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$1")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:F16
blockings=()
for columns in 1 2 4; do
  for team in 32 64 128; do
    for in_flight in 1 2; do blockings+=(--blocking "$columns,$team,$in_flight"); done
  done
done
for shape in "llama down M=1 " "llama gate_up M=1 " "llama qkv M=1 " "llama o M=1 "; do
  section "blockings: $shape"
  timeout 200 "$1" bench kernels --kernel linear --shape "$shape" "${blockings[@]}" | grep -E "Q4_(0|K) matvec" |
    cut -c1-120
done
wait
for round in 1 2; do
  for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M; do
    section "$f (round $round)"
    timeout 200 "$1" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 | rows
    section "$f disable_robustness (round $round)"
    timeout 200 "$1" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 --toggle disable_robustness | rows
  done
done
for sampling in "temperature=0.7" "temperature=0.7,top_p=0.8,top_k=20,repetition_penalty=1.05" \
                "temperature=0.6,top_p=0.9"; do
  section "qwen2.5-0.5b F16 sampled: $sampling"
  timeout 200 "$1" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 128 -r 3 --sampling "$sampling" | rows
done
section done
