#!/usr/bin/env bash
# The twenty-sixth session's fourth H200 call: 2 and 4 sequences of a random Llama-3-8B-shaped Q4_0 file decoded
# together with main (gerbil-base) and with four columns a team in linear_q_matvec where the grid keeps half the
# resident workgroups (gerbil-c4), whose decode products of 2-4 rows take the same rule.
#   bench/device/session26_batch.sh BASE C4   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/llama3-8b-Q4_0.gguf
rounds 2 "llama3-8b Q4_0, 2 and 4 sequences" bench model --model /tmp/llama3-8b-Q4_0.gguf -p 16 -g 64 -r 2 --batch 2,4
section done
