#!/usr/bin/env bash
# The twenty-sixth session's third H200 call: where the bounds checks' cost lies, and four columns a team in
# linear_q_matvec. tg128 of random GGUF files (Llama-3-8B's shape in Q4_0, Q4_K_M and F16, Qwen2.5-0.5B's in
# Q8_0) with main (gerbil-base) as it is, with Dawn's enable_integer_range_analysis_in_robustness toggle (Tint
# leaves out the index clamps it proves needless; the driver's robustBufferAccess2 still checks every buffer
# access) and with disable_robustness (no checks at all); and gerbil-c4 (four columns a team where the grid keeps
# half the resident workgroups).
#   bench/device/session26_toggles.sh BASE C4   (from the project root)
source "$(dirname "$0")/common.sh"
base=$1 c4=$2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in llama3-8b:Q4_0 llama3-8b:Q4_K_M qwen2.5-0.5b:Q8_0; do
  python3 bench/device/random_gguf.py "${f%%:*}" "${f#*:}" "/tmp/${f/:/-}.gguf"
done
random_ggufs llama3-8b:F16  # in the background, while the others run
range=(--toggle enable_integer_range_analysis_in_robustness)
run() {  # run LABEL BINARY ARGS...
  section "$1: $(basename "$2") ${*:3}"
  timeout 200 "$2" bench model "${@:3}" | rows
}
for f in llama3-8b-Q4_0 llama3-8b-Q4_K_M qwen2.5-0.5b-Q8_0; do
  args=(--model "/tmp/$f.gguf" -p 16 -g 128 -r 2 -d 0 2048)
  run "$f" "$base" "${args[@]}"
  run "$f" "$base" "${args[@]}" "${range[@]}"
  run "$f" "$c4" "${args[@]}"
  run "$f" "$base" "${args[@]}" --toggle disable_robustness
  run "$f" "$base" "${args[@]}"
done
wait
args=(--model /tmp/llama3-8b-F16.gguf -p 16 -g 128 -r 2 -d 8192)
run "llama3-8b F16" "$base" "${args[@]}"
run "llama3-8b F16" "$base" "${args[@]}" "${range[@]}"
run "llama3-8b F16" "$base" "${args[@]}" --toggle disable_robustness
section done
