#!/usr/bin/env bash
# Fiftieth session: where loading a model goes, and the staging ring against buffers mapped at creation. Each
# BINARY loads each random GGUF file (bench/device/random_gguf.py: FILES, by default Llama-3-8B's shape in Q4_0 and
# F16 and Qwen2.5-0.5B's in F16; written where this machine has none, so the page cache holds them) in turn, two
# rounds, and prints its load lines (`bench model -p 16 -g 16 -r 1`: load, weights, pipelines, warm-up; and whatever
# a binary adds on stderr, as the first call's b45b26d timing the upload's phases did). With COLD=1 the first round
# empties Dawn's pipeline cache before each load. Then each writes the logits of one 7-token prompt of each file,
# whose checksums must agree. Log in $OUT/session50_load.log.
#   [FILES="llama3-8b:Q4_K_M ..."] [COLD=1] bench/device/session50_load.sh BINARY...
source "$(dirname "$0")/common.sh"
exec > >(tee "${OUT:-/tmp}/session50_load.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
nproc; free -g | head -2
specs=(${FILES:-llama3-8b:Q4_0 qwen2.5-0.5b:F16 llama3-8b:F16})
files=("${specs[@]/:/-}")
missing_ggufs "${specs[@]}"
for round in 1 2; do
  for f in "${files[@]}"; do
    for b in "$@"; do
      [ "$round" = 1 ] && [ "${COLD:-0}" = 1 ] && rm -rf "$GERBIL_CACHE_DIR"
      room 40 && section "$f, round $round$([ "$round" = 1 ] && [ "${COLD:-0}" = 1 ] && echo ", cold"): $(basename "$b")" &&
        timeout 60 "$b" bench model --model /tmp/$f.gguf -p 16 -g 16 -r 1 -d 0 --ctx 256 2>&1 | grep -E '^(load|loaded|probe)'
    done
  done
done
section "the same logits"
for f in "${files[@]}"; do
  for b in "$@"; do
    room 20 && timeout 60 "$b" logits --model /tmp/$f.gguf --tokens 1,2,3,4,5,6,7 --ctx 256 --out /tmp/logits.bin 2>/dev/null &&
      echo "$f $(basename "$b"): $(md5sum < /tmp/logits.bin) $(stat -c %s /tmp/logits.bin) bytes"
  done
done
