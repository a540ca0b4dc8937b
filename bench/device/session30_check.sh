#!/usr/bin/env bash
# The thirtieth session's H200 check of its sampling change (presence and frequency penalties over the generated
# tokens only: sample.wgsl reads the prompt's tokens from bit 31 of the counts): the GPU suites it touches
# (bench/device/gpu_tests.sh, from .device/gpu_tests.tar.zst), `selftest --kernel sample`, then tg128 of a random
# Qwen2.5-0.5B F16 model, greedy and sampled with penalties, BASE against NEW in turn, two rounds.
#   bench/device/session30_check.sh BASE NEW   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
f16_models "${binaries[1]}" qwen
bash bench/device/gpu_tests.sh
section "selftest sample: $(basename "${binaries[1]}")"
timeout 200 "${binaries[1]}" selftest --kernel sample 2>&1 | tail -3
rounds 2 "qwen2.5-0.5b f16" bench model --model /tmp/q -p 16 -g 128 -r 3 -d 0 \
  --sampling temperature=0.7,top_k=20,top_p=0.8,repetition_penalty=1.05,presence_penalty=0.5
section done
