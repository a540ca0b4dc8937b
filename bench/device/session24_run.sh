#!/usr/bin/env bash
# The twenty-fourth session's first H200 call: decode attention at depth (flash_attention_sg in split mode) with
# variants of its work per workgroup against main (the first binary): a row group scoring 8 keys a round
# instead of 4 (gerbil-k8), split chunks in multiples of 64 keys instead of 128 (gerbil-g64), and both
# (gerbil-k8g64). tg128 at depths 0, 2,048 and 8,192 with the model's whole context (32,768 tokens: 64 chunks)
# on random GGUF files of Qwen2.5-0.5B's and Llama-3-8B's shapes in F16 (an f16 cache), each binary in turn; then
# a decode step at depth 8,192 profiled (every dispatch timed alone), greedy and with Qwen2.5's sampling
# settings, for the first and the last binary.
#   bench/device/session24_run.sh BASE CANDIDATE...   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 bench/device/random_gguf.py qwen2.5-0.5b F16 /tmp/qwen2.5-0.5b-F16.gguf
random_ggufs llama3-8b:F16  # in the background, while the small model runs
each "qwen2.5-0.5b F16" bench model --model /tmp/qwen2.5-0.5b-F16.gguf -p 16 -g 128 -r 2 -d 0 2048 8192
wait
each "llama3-8b F16" bench model --model /tmp/llama3-8b-F16.gguf -p 16 -g 128 -r 2 -d 0 2048 8192
qwen_sampling="temperature=0.7,top_p=0.8,top_k=20,repetition_penalty=1.05"
for b in "${binaries[0]}" "${binaries[-1]}"; do
  for f in qwen2.5-0.5b-F16 llama3-8b-F16; do
    section "profile $f: $(basename "$b")"
    timeout 200 "$b" bench model --model "/tmp/$f.gguf" -p 16 -g 8 -r 1 -d 8192 --profile --sampling "$qwen_sampling" |
      grep -E "^profile|attention|combine|sample|argmax|us in all"
  done
done
section done
