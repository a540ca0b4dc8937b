#!/usr/bin/env bash
# Two gerbil binaries side by side on the same random-block Llama-3-8B-shaped GGUF files (bench/device/random_gguf.py,
# seeded): Q4_0 first (it loads in about 3 s), then Q4_K_M, whose load did not finish within 38 s (two runs) or its
# whole `bench model --profile` within 70 s on main 78a61c0 in helper h-quant's calls of 2026-12-02 (Q4_0: 2.9 s).
# For each file and binary: `bench model -p 512 -g 128 -r 2 -d 0`, its lines printed as they come (stdbuf), so a
# run cut by its timeout still shows how far it got; the Q4_K_M runs also get a thread dump of the loading
# process after 30 s (gdb, where the machine has it), to show what the load waits on.
#   bench/device/quant_ab_run.sh BASELINE_BINARY BRANCH_BINARY [Q4_K_M_TIMEOUT_S]
# Stage both binaries in a carried folder and Dawn in .device/lib; run with carry [".device/lib", ".device/debs",
# ".device/gpu-env.sh", <that folder>].
cd "$(dirname "$0")/../.." && source .device/gpu-env.sh
export GERBIL_CACHE_DIR=/tmp/gerbil-cache
baseline=$(realpath "$1") branch=$(realpath "$2") km_timeout=${3:-120}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
python3 bench/device/random_gguf.py llama3-8b Q4_0 /tmp/q40.gguf &
python3 bench/device/random_gguf.py llama3-8b Q4_K_M /tmp/q4km.gguf &
"$baseline" tune | sed -n 2,3p
wait
bench() {  # binary file timeout_s
  stamp "$1 $2"
  timeout "$3" stdbuf -oL "$1" bench model --model "/tmp/$2.gguf" -p 512 -g 128 -r 2 -d 0 2>&1 |
    grep -E "^(loaded|pp|tg|load)" &
  if [ "$2" = q4km ] && command -v gdb >/dev/null; then
    sleep 30
    pid=$(pgrep -n -f "^$1 bench model --model /tmp/$2.gguf")
    [ -n "$pid" ] && timeout 30 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E "^(#|Thread)" |
      grep -vE "futex|pthread_cond|start_thread|clone" | head -60
  fi
  wait
}
for file in q40 q4km; do
  timeout_s=$([ $file = q4km ] && echo "$km_timeout" || echo 40)
  bench "$baseline" $file "$timeout_s"
  bench "$branch" $file "$timeout_s"
done
stamp done
