#!/usr/bin/env bash
# llama.cpp against gerbil on long contexts: a prompt of P tokens (ppP) and 128 tokens decoded after D tokens of
# context (tg128 @ dD), flash attention on, every layer on the GPU.
#   bench/peers/llama_depth_bench.sh LLAMA_BUILD_DIR MODEL.gguf [PROMPT, default 8192] [DEPTHS, default 0,2048,8192]
# llama-bench (this version has no depth option) runs ppD and the prompt-then-generate test -pg D,128 for each
# depth; tg128 @ dD is 128 tokens over the difference of their times. gerbil runs `bench model -p 512 -g 128 -d
# DEPTHS` and `-p PROMPT`. Prints, per test, both rates and gerbil / llama.cpp. GERBIL names gerbil's binary
# (default build/gerbil); build llama.cpp with bench/peers/build_llama_cpp.sh.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 LLAMA_BUILD_DIR MODEL.gguf [PROMPT] [DEPTHS]" >&2
  exit 2
fi
llama_bench=$1/bin/llama-bench model=$2 prompt=${3:-8192} depths=${4:-0,2048,8192}
gerbil=${GERBIL:-build/gerbil}
[[ -x "$llama_bench" ]] || { echo "$llama_bench: not found (build it with bench/peers/build_llama_cpp.sh)" >&2; exit 1; }
[[ -x "$gerbil" ]] || { echo "$gerbil: not found (set GERBIL)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "$model: no such file" >&2; exit 1; }

deep=$(tr , '\n' <<<"$depths" | grep -v '^0$' | paste -sd, -)
largest=$(tr , "\n" <<<"512,$depths,$prompt" | sort -n | tail -1)
pg=()
for d in ${deep//,/ }; do pg+=(-pg "$d,128"); done
llama_json=$(mktemp) gerbil_json=$(mktemp) gerbil_prompt_json=$(mktemp)
trap 'rm -f "$llama_json" "$gerbil_json" "$gerbil_prompt_json"' EXIT
"$llama_bench" -m "$model" -p "512,$prompt${deep:+,$deep}" -n 128 "${pg[@]}" -fa 1 -ngl 99 -r 2 -o json >"$llama_json"
"$gerbil" bench model --model "$model" -p 512 -g 128 -d ${depths//,/ } --ctx $((largest + 256)) -r 2 --json >"$gerbil_json"
"$gerbil" bench model --model "$model" -p "$prompt" -g 1 -d 0 --ctx $((largest + 256)) -r 2 --json >"$gerbil_prompt_json"
echo "== llama-bench"; cat "$llama_json"
echo "== gerbil bench model"; cat "$gerbil_json" "$gerbil_prompt_json"

python3 - "$llama_json" "$gerbil_json" "$gerbil_prompt_json" "$prompt" "$depths" <<'PY'
import json, sys
llama = json.load(open(sys.argv[1]))
prompt_len, depths = int(sys.argv[4]), [int(d) for d in sys.argv[5].split(",")]
prompt_ns = {r["n_prompt"]: r["avg_ns"] for r in llama if r["n_gen"] == 0}
peer = {f"pp{n}": 1e9 * n / ns for n, ns in prompt_ns.items()}
for r in llama:
    if r["n_gen"] == 128 and r["n_prompt"] == 0:
        peer["tg128 @ d0"] = r["avg_ts"]
    elif r["n_gen"] == 128:  # -pg D,128: a D-token prompt, then 128 generated tokens
        peer[f"tg128 @ d{r['n_prompt']}"] = 128e9 / (r["avg_ns"] - prompt_ns[r["n_prompt"]])
ours = {}
for path in sys.argv[2:4]:
    for r in json.load(open(path))["results"]:
        if r["test"].startswith("pp"):
            ours[r["test"]] = r["tokens_per_second"]
        elif r["test"] == "tg128":
            ours[f"tg128 @ d{r['depth']}"] = r["tokens_per_second"]
tests = ["pp512", f"pp{prompt_len}"] + [f"tg128 @ d{d}" for d in depths]
print(f"{'test':14} {'llama.cpp tok/s':>16} {'gerbil tok/s':>14} {'gerbil/llama.cpp':>17}")
for test in tests:
    if test not in peer or test not in ours:
        print(f"{test:14} missing from {'llama-bench' if test not in peer else 'gerbil'}'s report")
        continue
    print(f"{test:14} {peer[test]:16.1f} {ours[test]:14.1f} {ours[test] / peer[test]:17.3f}")
PY
