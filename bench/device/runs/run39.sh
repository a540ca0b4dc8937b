#!/usr/bin/env bash
# H200 run 39 (session 4, final commit): the decode attention as committed (run 38's kernel less its unused
# second subgroupAdd): checks, then qwen2.5-0.5b, gerbil-s3 (04f07f8) then gerbil.
cd "$(dirname "$0")/../../.." && source .device/gpu-env.sh
export GERBIL_FIXTURES=$PWD/.device/fixtures
o=$OUT; date > $o/log.txt
step() { local t=$1; shift; echo "== $*" >> $o/log.txt; timeout $t "$@" >> $o/log.txt 2>&1; echo "rc=$?" >> $o/log.txt; }
step 40 gerbil selftest --kernel flash_attention
step 30 test_graph_fixtures --gtest_brief=1
step 20 gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/qwen05
for b in gerbil-s3 gerbil; do echo "== $b" >> $o/qwen05.txt; timeout 45 $b bench model --model /tmp/qwen05 -d 0 2048 >> $o/qwen05.txt 2>>$o/log.txt; done
date >> $o/log.txt
