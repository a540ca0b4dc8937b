#!/usr/bin/env bash
# The thirty-seventh session's first H200 call (the thirty-sixth session's prepared call, which found no machine,
# with Q2_K beside Q3_K):
#   1. the first request after load, with and without Model::warm_up (BASE, CAND: `bench model -p 16 -g 16 -r 1`
#      prints the load, the cold first token, the warm pp16 and a warm process's first token of a new prompt length),
#      on a quiet machine;
#   2. Q2_K and Q3_K on the GPU: test_kernels_quant's cases of both (the gather and every product kernel against
#      float64), from .device/kquant_tests.tar.zst;
#   3. gerbil's pp512 / tg128 on random-block Llama-3-8B files in Q2_K, Q3_K_M and Q4_K_M (random_gguf.py);
#   4. Q3_K_M fixtures for tests/data/gguf/llamacpp: tools/make_gguf_fixtures.py with llama.cpp's own converter and
#      a CPU llama-quantize it builds, written to $OUT/gguf.
# Carry .device/{s37,lib,bin,debs,gpu-env.sh,llama.cpp.tar.xz,cut-tokenizers,kquant_tests.tar.zst}.
#   bench/device/session37_run.sh BASE CAND
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
binaries=("$1" "$2")
f16_models "$2" qwen llama
rounds 2 "0.5B first token" bench model --model /tmp/q -p 16 -g 16 -r 1 -d 0 --ctx 4096
rounds 2 "8B first token" bench model --model /tmp/l8 -p 16 -g 16 -r 1 -d 0 --ctx 4096
rm -rf /tmp/l8

section "fixtures and random files, in the background"
tar -C /tmp -xJf .device/llama.cpp.tar.xz
(python3 tools/make_gguf_fixtures.py /tmp/llama.cpp "${OUT:-/tmp/out}/gguf" --tokenizers .device/cut-tokenizers \
   --archs llama,qwen2 --quants Q3_K_M > /tmp/fixtures.log 2>&1; echo "fixtures exit $?" >> /tmp/fixtures.log) &
fixtures=$!
random_ggufs llama3-8b:Q2_K llama3-8b:Q3_K_M llama3-8b:Q4_K_M
files=$!

section "Q2_K and Q3_K kernels against float64"
mkdir -p /tmp/gt && zstd -dc .device/kquant_tests.tar.zst | tar x -C /tmp/gt
timeout 240 /tmp/gt/tests/test_kernels_quant --gtest_brief=1 --gtest_filter='*Q3_K*:*Q2_K*' 2>&1 | tail -8

wait "$files"
wait "$fixtures"
section "fixtures"
grep -E "Q3_K_M|exit|Error|error" /tmp/fixtures.log | tail -12
ls -la "${OUT:-/tmp/out}/gguf"
for f in Q2_K Q3_K_M Q4_K_M; do
  section "8B $f: $(du -h /tmp/llama3-8b-$f.gguf | cut -f1)"
  timeout 200 "$2" bench model --model /tmp/llama3-8b-$f.gguf -p 512 -g 128 -r 3 -d 0 | rows
done
section done
