#!/usr/bin/env bash
# The twenty-fourth session's second H200 call: why decode attention at depth costs what it does. Each binary
# (main first, then variants of flash_attention_sg: 8 keys a row group's round (k8), 2 (k2), workgroups of 128
# (wg128)) runs tg128 at depth 8,192 on a random Llama-3-8B F16 GGUF (the whole context, 64 chunks), twice in
# turn; then a decode step at depth 8,192 profiled (every dispatch timed alone) with Dawn's pipeline cache off,
# so that the driver compiles every program into a disk cache of the binary's own, which is disassembled
# (bench/sass) into $OUT/sass-NAME.tar.gz with a summary line per program (registers, spills, loads). With four
# binaries it ran past the device's 600 s a call (each profile with the pipeline cache off took about 70 s) and
# lost the last one's listing: give it three.
#   bench/device/session24_sass.sh BASE VARIANT...   (from the project root)
source "$(dirname "$0")/common.sh"
binaries=("$@")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
random_ggufs llama3-8b:F16
wait
rounds 2 "llama3-8b F16" bench model --model /tmp/llama3-8b-F16.gguf -p 16 -g 128 -r 2 -d 8192
export PATH="$PATH:/usr/local/cuda/bin:$PWD/.device/bin"
for b in "${binaries[@]}"; do
  name=$(basename "$b")
  section "profile and machine code: $name"
  mkdir -p "/tmp/nvc-$name"
  (export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH="/tmp/nvc-$name" __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
   GERBIL_CACHE_DIR=off timeout 150 "$b" bench model --model /tmp/llama3-8b-F16.gguf -p 16 -g 8 -r 1 -d 8192 --profile |
     grep -E "^profile: decode|attention")
  python3 bench/sass/disassemble_shader_cache.py "/tmp/nvc-$name" "/tmp/sass-$name" 2>&1 | tail -1
  python3 bench/sass/sass_summary.py "/tmp/sass-$name" > "/tmp/sass-$name/summary.txt"
  tar czf "$OUT/sass-$name.tar.gz" -C /tmp "sass-$name"
done
section done
