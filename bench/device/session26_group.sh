#!/usr/bin/env bash
# The twenty-sixth session's second H200 call: decode attention (flash_attention_sg) with the q heads of a kv head
# in one workgroup, each K and V word loaded once for all of them (gerbil-group: Llama-3-8B's 4 q heads a kv head
# grouped; Qwen2.5-0.5B's 7 are not, their registers over the rule's budget), against main (gerbil-base): tg128 at
# depths 0, 2,048 and 8,192 (the whole context of 32,768 tokens) of random GGUF files, Llama-3-8B's shape in F16
# and Q4_0 and Qwen2.5-0.5B's in F16, each binary in turn, two rounds; then a decode step of the 8B F16 file at
# depth 8,192 profiled (every dispatch timed alone) for both.
#   bench/device/session26_group.sh BASE GROUP   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py qwen2.5-0.5b F16 /tmp/qwen2.5-0.5b-F16.gguf
random_ggufs llama3-8b:F16 llama3-8b:Q4_0
rounds 2 "qwen2.5-0.5b F16" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 128 -r 2 -d 0 2048 8192
wait
for f in llama3-8b-F16 llama3-8b-Q4_0; do
  rounds 2 "$f" bench model --model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0 2048 8192
done
for b in "$@"; do
  section "profile llama3-8b-F16 at depth 8192: $(basename "$b")"
  timeout 200 "$b" bench model --model /tmp/llama3-8b-F16.gguf -p 16 -g 8 -r 1 -d 8192 --profile |
    grep -E "^profile|attention|combine|us in all"
done
section done
