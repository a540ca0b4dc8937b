#!/usr/bin/env bash
# Decode at depth, a baseline gerbil against candidates, interleaved, on random weights of Qwen2.5-0.5B's shape
# (f16, `gerbil synth`) and Llama-3-8B's (a Q4_0 GGUF from bench/device/random_gguf.py): tg128 at depths 0, 8,192
# and (0.5B) 32,768.
#   bench/device/decode_depth_ab.sh BASE CAND...
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/l8.gguf &
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
each "0.5B decode at depth" bench model --model /tmp/q05 -p 16 -g 128 -d 0 8192 32768 -r 2 --ctx 33024
wait
each "8B Q4_0 decode at depth" bench model --model /tmp/l8.gguf -p 16 -g 128 -d 0 8192 -r 2 --ctx 8448
section done
