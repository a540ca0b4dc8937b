#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_*.cpp, clang with ASan + UBSan, in build-fuzz) and runs each for
# SECONDS (default 60), one after another, then prints executions and crashes per target. Exits non-zero
# when any target crashed, leaked, hung or ran out of memory; the input that did it is copied into
# fuzz/regressions/<name>/ (commit it with the fix: CTest replays it in every build).
#   scripts/fuzz.sh [SECONDS] [NAME...]      e.g. scripts/fuzz.sh 600 tokenizer
# Each target's growing corpus is kept in build-fuzz/corpus/<name>, so later runs start where earlier ones
# stopped; the committed seeds (fuzz/corpus/<name>) and regression inputs are read, never written.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-60}
shift || true
build=build-fuzz

command -v clang++ >/dev/null || { echo "[fuzz] clang++ missing: run scripts/setup.sh" >&2; exit 1; }
if [ ! -f $build/build.ninja ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
        -DGERBIL_FUZZ=ON -DGERBIL_BUILD_TESTS=OFF -DGERBIL_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
fi
cmake --build $build --target fuzzers -j "$(nproc)"

names=("$@")
if [ ${#names[@]} = 0 ]; then
  for source in fuzz/fuzz_*.cpp; do
    name=$(basename "$source" .cpp); name=${name#fuzz_}
    [ "$name" = support ] || names+=("$name")
  done
fi

# Leaks count as crashes (libFuzzer's -detect_leaks); a sanitizer report ends the run at once.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rows=()
failed=0
for name in "${names[@]}"; do
  corpus=$build/corpus/$name artifacts=$build/crashes/$name/ log=$build/fuzz-$name.log
  mkdir -p "$corpus" "$artifacts"
  inputs=("$corpus")  # libFuzzer writes new inputs into the first folder only, and stops at a missing one
  for folder in "fuzz/corpus/$name" "fuzz/regressions/$name"; do [ -d "$folder" ] && inputs+=("$folder"); done
  echo "[fuzz] $name: ${seconds}s (log: $log)"
  status=0
  # -timeout: an input taking 20 s is a hang; -rss_limit_mb: libFuzzer's default, stated.
  $build/fuzz/fuzz_$name -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts" "${inputs[@]}" \
      >"$log" 2>&1 || status=$?
  executions=$( (grep -o 'stat::number_of_executed_units: [0-9]*' "$log" || true) | tail -n1 | awk '{print $2}')
  [ -n "$executions" ] || executions=$( (grep -oE '^#[0-9]+' "$log" || true) | tail -n1 | tr -d '#')
  crashes=0
  if [ $status != 0 ]; then
    crashes=1
    failed=1
    artifact=$( (grep -oE "Test unit written to [^ ]+" "$log" || true) | tail -n1 | awk '{print $5}')
    echo "[fuzz] $name FAILED (exit $status): $(grep -m1 -E 'ERROR: |runtime error|deadly signal' "$log" || true)"
    if [ -n "$artifact" ] && [ -f "$artifact" ]; then
      mkdir -p "fuzz/regressions/$name"
      cp "$artifact" "fuzz/regressions/$name/"
      echo "[fuzz]   input kept as fuzz/regressions/$name/$(basename "$artifact") (commit it with the fix)"
    fi
    tail -n 40 "$log"
  fi
  rows+=("$(printf '%-14s %12s %8s %8s' "$name" "${executions:-?}" "$crashes" "${seconds}s")")
done

printf '\n%-14s %12s %8s %8s\n' target executions crashes time
printf '%s\n' "${rows[@]}"
exit $failed
