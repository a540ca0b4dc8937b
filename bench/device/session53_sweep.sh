#!/usr/bin/env bash
# The fifty-third session's sweep of flash_attention_block.wgsl's blockings (rows x keys a thread) with an f16
# cache's tile kept in its words: SWEEP is a one-off build whose dispatcher takes the blocking GERBIL_FA_BLOCK
# names ("4,2") where it fits; the kernel alone at Qwen2.5-0.5B's heads, then pp8192 of both F16 shapes at 4 x 2
# and 4 x 4, and BASE's pp8192 of the 8B.
#   LIMIT=570 bench/device/session53_sweep.sh BASE SWEEP
source "$(dirname "$0")/common.sh"
base=$(realpath "$1") sweep=$(realpath "$2")
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
random_ggufs qwen2.5-0.5b:F16 llama3-8b:F16
for blk in 4,2 4,4 2,4 2,2 4,1; do
  section "kernels at $blk"
  GERBIL_FA_BLOCK=$blk timeout 60 "$sweep" bench kernels --kernel attention --shape "prefill T=" | grep -E '^  flash' |
    grep -v "T=S=50"
done
for f in qwen2.5-0.5b-F16 llama3-8b-F16; do
  while ! [ -f /tmp/$f.gguf ]; do sleep 2; done
  for blk in 4,2 4,4; do
    section "$f at $blk"
    GERBIL_FA_BLOCK=$blk timeout 100 "$sweep" bench model --model /tmp/$f.gguf -p 8192 -g 4 -r 2 -d 0 | grep -E '^pp'
  done
  section "$f, BASE"
  timeout 100 "$base" bench model --model /tmp/$f.gguf -p 8192 -g 4 -r 2 -d 0 | grep -E '^pp'
done
