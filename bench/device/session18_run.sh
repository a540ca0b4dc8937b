#!/usr/bin/env bash
# The eighteenth session's H200 call: the split-KV combine that reads the records' maxes once, in parallel, and
# skips empty chunks' sums (gerbil-cand) against main (gerbil-base), interleaved, on random weights of
# Qwen2.5-0.5B's shape (f16, `gerbil synth`) and Llama-3-8B's (a Q4_0 GGUF from bench/device/random_gguf.py):
# tg128 at depths 0, 2,048, 8,192 and (0.5B) 32,768; a profile of a 0.5B decode step at depth 8,192; 0.5B
# batched decoding at 1, 16 and 64 sequences.
#   bench/device/session18_run.sh BASE CAND   (from the project root; output: one log per binary and section)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/l8.gguf &
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
each "0.5B decode at depth" bench model --model /tmp/q05 -p 16 -g 128 -d 0 2048 8192 32768 -r 2 --ctx 33024
for b in "${binaries[@]}"; do
  section "0.5B profile at depth 8192: $(basename "$b")"
  timeout 240 "$b" bench model --model /tmp/q05 -p 16 -g 16 -d 8192 -r 1 --ctx 33024 --profile |
    grep -iE "flash|combine|^tg|total" | head -20
done
each "0.5B batched" bench model --model /tmp/q05 -p 128 -g 128 --batch 1 16 64 -r 1 --ctx 33024
wait
each "8B Q4_0 decode at depth" bench model --model /tmp/l8.gguf -p 16 -g 128 -d 0 2048 8192 -r 2 --ctx 8448
section done
