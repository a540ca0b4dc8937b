#!/usr/bin/env bash
# The thirty-second session's H200 calls: the rotary table's attention factor (YaRN, LongRoPE) on a real GPU.
#   bench/device/session32_check.sh tests        the long references against transformers itself (float64), then
#                                                every GPU test suite (.device/gpu_tests.tar.zst, see gpu_tests.sh)
#   bench/device/session32_check.sh speed BASE CAND
#                                                f16 decode of BASE (before the change) and CAND, interleaved, on
#                                                random weights of Qwen2.5-0.5B's and Llama-3-8B's shapes: tg128 at
#                                                depths 0 and 8,192
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case $1 in
  tests)
    section "tests/data/long against transformers (float64, eager attention)"
    python3 tools/check_long_references.py --data tests/data/long
    section "GPU test suites"
    bash bench/device/gpu_tests.sh
    ;;
  speed)
    binaries=("$2" "$3")
    f16_models "$3" qwen llama
    rounds 2 "0.5B f16 decode" bench model --model /tmp/q -p 16 -g 128 -d 0 8192 -r 2 --ctx 8448
    rounds 2 "8B f16 decode" bench model --model /tmp/l8 -p 16 -g 128 -d 0 8192 -r 2 --ctx 8448
    ;;
esac
section done
