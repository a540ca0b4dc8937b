#!/usr/bin/env bash
# llama.cpp against gerbil on batched decoding, llama-batched-bench's way: N sequences of 128 prompt and 128
# generated tokens each, prompts not shared, aggregate generated tokens per second.
#   bench/peers/llama_batched_bench.sh LLAMA_BUILD_DIR MODEL.gguf [SEQUENCES, default 1,4,16,64]
# Runs `llama-batched-bench -npp 128 -ntg 128 -npl SEQUENCES -fa -ngl 99` and `gerbil bench model -p 128 -g 128
# --batch SEQUENCES --json` (GERBIL names the binary; default build/gerbil) and prints, per count, both rates and
# gerbil / llama.cpp. Build llama.cpp with bench/peers/build_llama_cpp.sh.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf [SEQUENCES]" >&2
  exit 2
fi
batched_bench=$1/bin/llama-batched-bench model=$2 counts=${3:-1,4,16,64}
gerbil=${GERBIL:-build/gerbil}
[[ -x "$batched_bench" ]] || { echo "$batched_bench: not found (build it with bench/peers/build_llama_cpp.sh)" >&2; exit 1; }
[[ -x "$gerbil" ]] || { echo "$gerbil: not found (set GERBIL)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "$model: no such file" >&2; exit 1; }

largest=$(tr , '\n' <<<"$counts" | sort -n | tail -1)
llama_out=$(mktemp) gerbil_json=$(mktemp)
trap 'rm -f "$llama_out" "$gerbil_json"' EXIT
"$batched_bench" -m "$model" -c $((largest * 256)) -b 2048 -ub 512 -npp 128 -ntg 128 -npl "$counts" -fa -ngl 99 \
  --output-format jsonl >"$llama_out" 2>/dev/null
"$gerbil" bench model --model "$model" -p 128 -g 128 --batch "$counts" --json >"$gerbil_json"
echo "== llama-batched-bench"; cat "$llama_out"
echo "== gerbil bench model --batch"; cat "$gerbil_json"

python3 - "$llama_out" "$gerbil_json" <<'PY'
import json, sys
peer = {}
for line in open(sys.argv[1]):
    if line.startswith("{"):
        row = json.loads(line)
        peer[row["pl"]] = row["speed_tg"]
ours = {r["sequences"]: r["decode_tokens_per_second"] for r in json.load(open(sys.argv[2]))["results"]}
print(f"{'sequences':>9} {'llama.cpp tok/s':>16} {'gerbil tok/s':>14} {'gerbil/llama.cpp':>17}")
for n in sorted(set(peer) | set(ours)):
    if n not in peer or n not in ours:
        print(f"{n:9} missing from {'llama-batched-bench' if n not in peer else 'gerbil'}'s report")
        continue
    print(f"{n:9} {peer[n]:16.1f} {ours[n]:14.1f} {ours[n] / peer[n]:17.3f}")
PY
