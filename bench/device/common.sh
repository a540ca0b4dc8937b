# Sourced by the H200 scripts of bench/device (from the project root, as they are run): Dawn and the Vulkan
# loader staged as .device/gpu-env.sh expects, a kernel cache of the call's own, and the helpers that label
# sections by the seconds since the start, keep the rows of `gerbil bench model` (of each binary in turn: each)
# and write random GGUF files (random_ggufs).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source .device/gpu-env.sh
export GERBIL_CACHE_DIR=/tmp/gerbil-cache PYTHONUNBUFFERED=1
t0=$(date +%s)
section() { echo; echo "=== [$(( $(date +%s) - t0 )) s] $*"; }
rows() { grep -E "^(pp|tg|load|model:|[0-9]+ )"; }
each() {  # each LABEL ARGS...: every binary of the array `binaries` in turn, one run each, its rows kept
  local label=$1; shift
  for b in "${binaries[@]}"; do
    section "$label: $(basename "$b") $*"
    timeout 240 "$b" "$@" | rows
  done
}
random_ggufs() {  # random_ggufs SHAPE:TYPE ...: /tmp/SHAPE-TYPE.gguf of each (random_gguf.py), in the background
  (for f in "$@"; do python3 bench/device/random_gguf.py "${f%%:*}" "${f#*:}" "/tmp/${f/:/-}.gguf"; done) &
}
