#!/usr/bin/env bash
# Forty-first session, one call for three experiments (its log in $OUT/session41_all.log). MAIN is the fortieth
# session's final code (eca8617), NEW this session's: flash_attention_block.wgsl's 4 x 4 blocks over 8 key threads,
# and constrained decoding on the GPU (a mask of allowed ids before each step's pick, mask_tokens.wgsl) where MAIN
# read every step's logits back to the host. ENV_TEAMS is MAIN reading linear_rows' teams from GERBIL_TEAMS (a
# one-off build). In order:
#  1. NEW against float64 on the GPU (selftest flash_attention, mask_tokens); `bench kernels --kernel attention`
#     at the prefill shapes, MAIN and NEW;
#  2. pp512 and pp8192 of Qwen2.5-0.5B (f16, gerbil synth with the qwen3 tokenizer) and Llama-3-8B (a random F16
#     GGUF file, random_gguf.py), MAIN and NEW (issue 22: pp8192 at 90 % of pp512);
#  3. one 0.5B sequence streamed through `gerbil serve`, unconstrained and constrained to a long JSON string
#     (serve_stream.py), MAIN and NEW (issue 20: constrained within 20 % of unconstrained);
#  4. `bench kernels` of linear_rows at 16 rows over blockings COLUMNS,LANES,UNROLL,TEAMS (f16, Q4_0), then
#     batched decoding of the 8B at 16 and 64 sequences with 1, 2 and 4 teams (ENV_TEAMS).
# Carry .device/{s41,lib,bin,debs,gpu-env.sh,tokenizers}.
# With a fourth argument `short` (little device time left), it stops after the streams (3).
#   bench/device/session41_all.sh MAIN NEW ENV_TEAMS [short]
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session41_all.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
[ "${4:-}" = short ] || random_ggufs llama3-8b:F16
mkdir -p /tmp/tokenizers && tar -C /tmp/tokenizers -xJf .device/tokenizers/qwen3.tar.xz
"$1" synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --tokenizer /tmp/tokenizers/qwen3 --out /tmp/qs > /dev/null &
synth=$!
section "NEW against float64"
timeout 100 "$2" selftest --kernel flash_attention 2>&1 | tail -1
timeout 60 "$2" selftest --kernel mask_tokens 2>&1 | tail -1
for b in "$1" "$2"; do
  section "attention kernels: $(basename "$b")"
  timeout 60 "$b" bench kernels --kernel attention --shape prefill | grep -E "T=" | cut -c1-120
done
wait $synth
binaries=("$1" "$2")
prompts() {  # prompts MODEL: pp512 and pp8192, MAIN and NEW
  rounds 1 "$1 pp512" bench model --model "$1" -p 512 -g 16 -r 3 -d 0
  rounds 1 "$1 pp8192" bench model --model "$1" -p 8192 -g 16 -r 2 -d 0
}
prompts /tmp/qs
for b in "$1" "$2"; do streams "$b" /tmp/qs '{"type": "string", "minLength": 100000}'; done
if [ "${4:-}" = short ]; then section done; exit 0; fi
wait
prompts /tmp/llama3-8b-F16.gguf
section "linear_rows at 16 rows: blockings COLUMNS,LANES,UNROLL,TEAMS"
blockings=()
for b in 2,8,2,1 2,8,2,2 2,8,2,4 2,8,2,8 2,8,1,4 4,8,1,1 4,8,1,2 4,8,1,4 1,8,4,8; do blockings+=(--blocking "$b"); done
timeout 90 "$1" bench kernels --kernel linear --shape "M=16 " "${blockings[@]}" | grep -E "M=16 " | cut -c1-110
for teams in 1 2 4; do
  section "8B f16 batched, $teams teams"
  GERBIL_TEAMS=$teams timeout 150 "$3" bench model --model /tmp/llama3-8b-F16.gguf -p 128 -g 32 -r 1 --batch 16 64 | rows
done
section done
