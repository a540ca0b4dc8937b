#!/usr/bin/env bash
# One H200 device call for issue 22 (attention at depth): main's binary (.device/bin/gerbil-main) against this
# branch's (.device/bin/gerbil) on random f16 weights of Qwen2.5-0.5B's and Llama-3-8B's shapes: the attention
# check on the H200's 32-lane subgroups, pp512 and pp8192, decode at depths 0, 2,048, 8,192 and 32,768 with
# the f32 and f16 KV cache. Stage as bench/device/kv_and_batch_run.sh says, in the checkout the device tool
# copies (the session's repository root), with main's binary as .device/bin/gerbil-main and the branch's as
# .device/bin/gerbil, then run it with carry [".device"] (about 4 minutes of commands). Written in the thirteenth
# session and not run yet: the session's device time ran out.
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
o=$OUT
log() { echo "== $*" >> $o/log.txt; }
date > $o/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $o/log.txt
bench() {  # NAME BINARY TIMEOUT ARGS...: one bench model run, appended to $o/bench.txt
  local name=$1 bin=$2 t=$3; shift 3
  log "$name: $bin bench model $*"
  echo "== $name: $bin bench model $*" >> $o/bench.txt
  timeout "$t" .device/bin/$bin bench model "$@" >> "$o/bench.txt" 2>> $o/log.txt || log "$name failed ($?)"
}
# Llama's weights are written while the check runs; nothing else runs beside the benchmarks.
gerbil synth --preset llama3-8b --dtype f16 --seed 1 --out /tmp/l >> $o/log.txt 2>&1 &
timeout 60 gerbil selftest --quick --kernel flash_attention > $o/selftest.txt 2>&1 || log "selftest failed ($?)"
gerbil synth --preset qwen2.5-0.5b --dtype f16 --seed 1 --out /tmp/q >> $o/log.txt 2>&1
wait
log "weights written"
for bin in gerbil-main gerbil; do
  bench q_$bin 60 $bin --model /tmp/q -p 512 -g 64 -r 3 -d 0 2048 8192 --ctx 8448 --kv-cache f32
  bench q_pp8192_$bin 40 $bin --model /tmp/q -p 8192 -g 8 -r 2 -d 0 --ctx 8448 --kv-cache f32
done
bench q_f16_gerbil 60 gerbil --model /tmp/q -p 512 -g 64 -r 3 -d 0 2048 8192 --ctx 8448 --kv-cache f16
bench q_f16_gerbil-main 60 gerbil-main --model /tmp/q -p 512 -g 64 -r 3 -d 0 8192 --ctx 8448 --kv-cache f16
bench q_pp8192_f16_gerbil 40 gerbil --model /tmp/q -p 8192 -g 8 -r 2 -d 0 --ctx 8448 --kv-cache f16
for kv in f32 f16; do bench q_d32k_${kv}_gerbil 40 gerbil --model /tmp/q -p 512 -g 32 -r 1 -d 32768 --ctx 32808 --kv-cache $kv; done
bench q_d32k_f32_gerbil-main 40 gerbil-main --model /tmp/q -p 512 -g 32 -r 1 -d 32768 --ctx 32808 --kv-cache f32
for bin in gerbil-main gerbil; do
  bench l_$bin 60 $bin --model /tmp/l -p 512 -g 32 -r 1 -d 0 8192 --ctx 8448 --kv-cache f32
done
bench l_f16_gerbil 60 gerbil --model /tmp/l -p 512 -g 32 -r 1 -d 0 8192 --ctx 8448 --kv-cache f16
for bin in gerbil-main gerbil; do
  bench l_pp8192_$bin 40 $bin --model /tmp/l -p 8192 -g 4 -r 1 -d 0 --ctx 8448 --kv-cache f32
done
date >> $o/log.txt
