#!/usr/bin/env bash
# The thirty-seventh session's second call: why Llama-3-8B's first prompt after load stays 3-4x a warm one with the
# warm-up (0.5B's does not). The GPU's clocks and performance state are sampled every 20 ms (nvidia-smi, written to
# $OUT/clocks.csv) through CAND's loads and first prompts, and EXPERIMENT (CAND whose warm-up runs a
# GERBIL_WARMUP_TOKENS-token prompt, 16 by default, GERBIL_WARMUP_ROUNDS times; not committed) runs with 4 and 16
# rounds, and with one round of the cold prompt's own 14 tokens; on a quiet machine.
# Carry .device/{s37,lib,bin,debs,gpu-env.sh}.
#   bench/device/session37_first_token.sh CAND EXPERIMENT   (CAND: the main line)
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
f16_models "$1" llama
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv,noheader \
  -lms 20 > /tmp/clocks.csv &
sampler=$!
first_token() {  # first_token LABEL BINARY: one bench run's first-token rows, with wall-clock marks for the clocks
  section "$1"
  echo "start $(date +%H:%M:%S.%N | cut -c1-12)"
  timeout 120 "$2" bench model --model /tmp/l8 -p 16 -g 16 -r 1 -d 0 --ctx 4096 | grep -E "^(pp16|load|warm|time to)"
  echo "end $(date +%H:%M:%S.%N | cut -c1-12)"
}
first_token "8B first token: CAND" "$1"
for r in 4 16; do GERBIL_WARMUP_ROUNDS=$r first_token "8B first token: EXPERIMENT, $r warm-up rounds" "$2"; done
GERBIL_WARMUP_TOKENS=14 first_token "8B first token: EXPERIMENT, a 14-token warm-up" "$2"
first_token "8B first token: CAND again" "$1"
kill "$sampler"
cp /tmp/clocks.csv "${OUT:-/tmp}/clocks.csv"
rm -rf /tmp/l8

section done
