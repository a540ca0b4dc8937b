#!/usr/bin/env bash
# The twenty-eighth session's third H200 call: sampled decoding with one cut (top-k or top-p alone) recording 6
# sampling levels instead of 10 (kernels::sample_levels), against main (the first binary). tg128 of a random
# Qwen2.5-0.5B F16 file at depths 0 and 2,048, greedy and sampled (bench model's top-k 20 and top-p 0.9 rows, and
# Qwen2.5's settings: temperature 0.7, top-k 20, top-p 0.8, repetition penalty 1.05), three rounds in turn; then
# each binary's decode step with top-p 0.9 at temperature 0.6, every dispatch timed alone (--profile).
#   bench/device/session28_sampling.sh BASE CANDIDATE   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs qwen2.5-0.5b:F16
wait
rounds 3 "qwen2.5-0.5b F16" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 128 -r 3 -d 0 2048 \
  --sampling temperature=0.7,top_k=20,top_p=0.8,repetition_penalty=1.05
for b in "${binaries[@]}"; do
  section "$(basename "$b"): profile of a decode step sampled with top-p 0.9"
  timeout 120 "$b" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 16 -r 1 -d 0 --profile \
    --sampling temperature=0.6,top_p=0.9 | grep -iE "^profile|sampl|argmax|all$"
done
section done
