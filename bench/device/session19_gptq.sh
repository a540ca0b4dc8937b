#!/usr/bin/env bash
# The nineteenth session's GPTQ call: GPTQ int4 layers repacked into Q4_G blocks that the GGUF kernels read
# (gerbil-cand) against their own linear_gptq kernel (gerbil-base), on random GPTQ folders of Qwen2.5-0.5B's and
# Llama-3-8B's shapes (bench/device/random_gptq.py over `gerbil synth` f16 folders, groups of 128): `bench kernels`
# on the int4 shapes, `bench model` pp512 / tg128 and batched decoding, each binary in turn.
#   bench/device/session19_gptq.sh BASE CAND   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q05 | tail -1
python3 bench/device/random_gptq.py /tmp/q05 /tmp/q05-gptq
(("$1" synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l8 | tail -1) &&
  python3 bench/device/random_gptq.py /tmp/l8 /tmp/l8-gptq && rm -rf /tmp/l8) &
section tuning; "$1" tune | tail -2
for b in "${binaries[@]}"; do
  section "int4 products: $(basename "$b")"
  timeout 120 "$b" bench kernels --kernel matmul_int4 | grep -E "^ *(matmul_int4|linear)"
done
each "0.5B GPTQ" bench model --model /tmp/q05-gptq -p 512 -g 128 -r 2
each "0.5B GPTQ batched" bench model --model /tmp/q05-gptq -p 128 -g 128 --batch 1 4 16 -r 1
wait
each "8B GPTQ" bench model --model /tmp/l8-gptq -p 512 -g 128 -r 2 --ctx 4096
each "8B GPTQ batched" bench model --model /tmp/l8-gptq -p 128 -g 128 --batch 1 16 -r 1 --ctx 4096
section done
