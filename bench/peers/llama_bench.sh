#!/usr/bin/env bash
# llama.cpp against gerbil on one GGUF file, llama-bench's way: pp512 (a 512-token prompt) and tg128 (128
# generated tokens), flash attention on, every layer on the GPU.
#   bench/peers/llama_bench.sh LLAMA_BUILD_DIR MODEL.gguf [gerbil bench model args...]
# Runs `llama-bench -m MODEL -p 512 -n 128 -fa 1 -ngl 99 -o json` and `gerbil bench model --model MODEL -p 512
# -g 128 --json` (GERBIL names the binary; default build/gerbil), prints both reports and, per test, both speeds
# and gerbil / llama.cpp. Build llama.cpp with bench/peers/build_llama_cpp.sh.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf [gerbil bench model args...]" >&2
  exit 2
fi
llama_bench=$1/bin/llama-bench
model=$2
shift 2
gerbil=${GERBIL:-build/gerbil}
[[ -x "$llama_bench" ]] || { echo "$llama_bench: not found (build it with bench/peers/build_llama_cpp.sh)" >&2; exit 1; }
[[ -x "$gerbil" ]] || { echo "$gerbil: not found (set GERBIL)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "$model: no such file" >&2; exit 1; }

llama_json=$(mktemp) gerbil_json=$(mktemp)
trap 'rm -f "$llama_json" "$gerbil_json"' EXIT
"$llama_bench" -m "$model" -p 512 -n 128 -fa 1 -ngl 99 -o json >"$llama_json"
"$gerbil" bench model --model "$model" -p 512 -g 128 --json "$@" >"$gerbil_json"
echo "== llama-bench"; cat "$llama_json"
echo "== gerbil bench model"; cat "$gerbil_json"

python3 - "$llama_json" "$gerbil_json" <<'PY'
import json, sys
llama = json.load(open(sys.argv[1]))
gerbil = json.load(open(sys.argv[2]))
# llama-bench: one object per test, n_prompt/n_gen say which; gerbil: results named pp512 / tg128 at depth 0.
peer = {}
for r in llama:
    name = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    peer[name] = r["avg_ts"]
ours = {r["test"]: r["tokens_per_second"] for r in gerbil["results"] if r.get("depth", 0) == 0}
print(f"{'test':8} {'llama.cpp tok/s':>16} {'gerbil tok/s':>14} {'gerbil/llama.cpp':>17}")
for test in ("pp512", "tg128"):
    if test not in peer or test not in ours:
        print(f"{test:8} missing from {'llama-bench' if test not in peer else 'gerbil'}'s report")
        continue
    print(f"{test:8} {peer[test]:16.1f} {ours[test]:14.1f} {ours[test] / peer[test]:17.3f}")
PY
