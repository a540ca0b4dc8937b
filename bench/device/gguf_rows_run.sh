#!/usr/bin/env bash
# gerbil alone on random-block GGUF files in Llama-3-8B's and Qwen2.5-0.5B's shapes (bench/device/random_gguf.py,
# seeded: the same bytes as bench/device/peer_run.sh's, where llama.cpp ran beside gerbil), then batched decoding
# of a random f16 Qwen2.5-0.5B: the fourteenth session's last H200 call (docs/PERFORMANCE.md), about 2.5 minutes.
# Stage gerbil in .device/bin and Dawn in .device/lib; run with carry [".device/bin", ".device/lib",
# ".device/debs", ".device/gpu-env.sh"].
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
export GERBIL_CACHE_DIR=/tmp/gc
gerbil tune | sed -n 2,3p
rows() { timeout 60 gerbil bench model "$@" 2>&1 | grep -E "^(pp|tg|load|loaded)"; }
for file in llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q8_0; do
  python3 bench/device/random_gguf.py "${file%%:*}" "${file#*:}" /tmp/m.gguf
  rows --model /tmp/m.gguf -p 512 -g 128 -r 2
done
gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q >/dev/null
timeout 40 gerbil bench model --model /tmp/q -p 128 -g 128 --batch 1,4,8,16 2>&1 | tail -8
