#!/usr/bin/env bash
# The thirty-third session's H200 call: the first request after load, before and after loading waits for the
# weights' copies to GPU memory (Device::submit_recorded, upload_weights' wait). BASE and CAND take turns on random
# f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes; `bench model` prints load time, the cold first token (the
# first 14-token prompt after load) and the warm pp16 beside it.
#   bench/device/session33_first_token.sh BASE CAND
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
binaries=("$1" "$2")
f16_models "$2" qwen llama
rounds 3 "0.5B first token" bench model --model /tmp/q -p 16 -g 16 -r 1 --ctx 4096
rounds 3 "8B first token" bench model --model /tmp/l8 -p 16 -g 16 -r 1 --ctx 4096
section done
