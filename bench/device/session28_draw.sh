#!/usr/bin/env bash
# The twenty-eighth session's fourth H200 call: where sample.wgsl's draw (one workgroup) spends its time. Main
# (the first binary) and two probes that are not in the repository and draw wrong tokens: `nosort` leaves the
# gathered tokens unsorted (cut_gathered's bitonic sort), `nowalk` returns a token of the marked chunk without
# walking it (draw_span). A random Qwen2.5-0.5B F16 file's decode step sampled with top-p 0.9 (temperature 0.6)
# and with top-k 20 and top-p 0.8 (temperature 0.7), every dispatch timed alone (--profile).
#   bench/device/session28_draw.sh MAIN NOSORT NOWALK   (from the project root)
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs qwen2.5-0.5b:F16
wait
for setting in temperature=0.6,top_p=0.9 temperature=0.7,top_k=20,top_p=0.8; do
  for b in "$@"; do
    section "$(basename "$b"): profile of a decode step sampled with $setting"
    timeout 120 "$b" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 64 -r 3 -d 0 --profile \
      --sampling "$setting" | grep -iE "^profile: decode|sample (draw|level [0-2]|hist|chunks)|^tg64 .sampled"
  done
done
section done
