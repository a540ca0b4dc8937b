#!/usr/bin/env bash
# The fifty-third session's first call: on an H200, the standing rows issue 20 and 21 still miss there (standing.sh:
# batched 8B F16, 8B Q4_0 pp512 / tg128, 8B F16 at depths to 8,192); on another card, where a long prompt's time
# goes (the attention kernels alone, and the profile of the last 2,048-token chunk of an 8,192-token prompt of each
# F16 shape).
#   LIMIT=570 bench/device/session53_probe.sh GERBIL
source "$(dirname "$0")/common.sh"
G=$(realpath "$1")
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$card"
if [[ $card == *H200* ]]; then
  ONLY='batched llama3-8b-F16|pp512 tg128 llama3-8b-Q4_0|depths to 8192 llama3-8b-F16' bench/device/standing.sh "$G"
  exit
fi
random_ggufs qwen2.5-0.5b:F16 llama3-8b:F16
section "attention kernels"
timeout 150 "$G" bench kernels --kernel attention --shape prefill
for f in qwen2.5-0.5b-F16 llama3-8b-F16; do
  while ! [ -f /tmp/$f.gguf ]; do sleep 2; done
  section "profile of pp8192, $f"
  room 150 && timeout 150 "$G" bench model --model /tmp/$f.gguf -p 8192 -g 4 -r 1 -d 0 --profile |
    grep -v '^tg4 ('
done
