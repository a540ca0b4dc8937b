#!/usr/bin/env bash
# Forty-sixth session, first call (its log in $OUT/session46_check.log): main at e8b9f46 (MAIN) on the GPU.
#  1. `selftest --kernel sample` and the GPU suites of the scheduler and the batched step (gpu_tests.sh): the
#     forty-fifth session's fixes (a step queued ahead copies each remaining row's pick; a sampled step ahead
#     serves a greedy batch) had run on lavapipe only;
#  2. issue 20's batched rows on this machine: random f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes, 128
#     prompt tokens, decode at 1, 4, 16 and 64 sequences; the 8B's step at 16 sequences profiled, and linear
#     products at 16 rows (`bench kernels`), the baseline of this session's batched-product work;
#  3. issue 22's rows after the thirty-ninth session's prompt kernel (two slabs a turn, timed on an H100 only):
#     pp512 and pp8192, tg128, load time and the cold first token, both shapes.
# Carry .device/{s46,lib,bin,debs,gpu-env.sh,gpu_tests.tar.zst}.
#   bench/device/session46_check.sh MAIN
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session46_check.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
[ -f /tmp/l8/config.json ] || f16_models "$1" qwen llama &
models=$!
section "selftest --kernel sample"
timeout 100 "$1" selftest --kernel sample 2>&1 | tail -2
section "GPU suites"
bash bench/device/gpu_tests.sh 2>&1 | grep -E "^===|PASSED|FAILED|tests? ran|Failure|error"
wait $models
section "linear products at 16 rows"
timeout 120 "$1" bench kernels --kernel linear --shape "M=16 " | grep -E "M=16 " | cut -c1-120
section "0.5B batched, greedy"
timeout 120 "$1" bench model --model /tmp/q -p 128 -g 64 --batch 1,4,16,64 | rows
section "8B batched, greedy"
timeout 180 "$1" bench model --model /tmp/l8 -p 128 -g 32 --batch 1,4,16,64 | rows
section "8B batched at 16, profiled"
timeout 120 "$1" bench model --model /tmp/l8 -p 128 -g 16 --batch 16 --profile | head -45
section "0.5B prompts and decode"
timeout 60 "$1" bench model --model /tmp/q -p 512 -g 128 -r 3 | rows
timeout 90 "$1" bench model --model /tmp/q -p 8192 -g 16 -r 2 | rows
section "8B prompts and decode"
timeout 90 "$1" bench model --model /tmp/l8 -p 512 -g 128 -r 2 | rows
timeout 120 "$1" bench model --model /tmp/l8 -p 8192 -g 16 -r 2 | rows
section done
