#!/usr/bin/env bash
# Runs every test on the default WebGPU adapter (Mesa lavapipe on a machine without a GPU), in three parts:
#   tests      the GoogleTest suites and fuzz replays of the Release build (build/), through CTest
#   sanitized  the library's tests that are worth it under ASan + UBSan (build-asan, see below)
#   fuzz       every libFuzzer target for FUZZ_SECONDS each (20 under CI=true, else 10; 0 skips)
# then prints each part's time. A part that fails does not stop the others; the script fails if any did.
# Fixtures are read from ../shared/fixtures: suites that need them skip, saying so, when that folder or the
# tokenizer packages are absent, and fail under CI=true. Extra arguments go to the first part's ctest.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -x build/gerbil ] || { echo "[test] build/gerbil missing: run scripts/setup.sh first" >&2; exit 1; }
jobs=$(nproc)
ci=${CI:-false}
fuzz_seconds=${FUZZ_SECONDS:-$([ "$ci" = true ] && echo 20 || echo 10)}

# The tests run under ASan + UBSan (and libstdc++'s assertions): those of the parsers (every byte they read is
# untrusted: model files, tokenizers, templates, requests, JSON schemas and the constraints they compile), the sampler
# and the generation path from files to tokens (the scheduler's threads, batched steps, cancellation and GPU
# read-backs on five fixture architectures, and the decode loop when its consumer throws), and the staging ring that
# carries weights to the GPU (windows that end inside a word, raw pointers into mapped memory). The kernel, fixture
# and engine suites are left out to keep CI inside its time on 2 cores: they are the bulk of the time on
# lavapipe, their WGSL runs inside the (uninstrumented) Vulkan driver, and the host code that records their
# dispatches and drives the engine is the scheduler's, which runs here. Built at -O1 -g1 (fast to compile, still
# symbolised).
sanitized_tests=(test_model_config test_model_safetensors test_model_weights test_model_gguf test_model_gguf_llamacpp
                 test_model_quant test_model_awq test_model_synth test_json test_server_request
                 test_generate_output_parser test_generate_json_constraint test_tokenizer test_tokenizer_errors
                 test_tokenizer_stream test_tokenizer_units test_template test_template_jinja test_generate_sampler
                 test_graph_decode_errors test_generate_scheduler test_gpu_staging)
# On a fresh machine most of the tests' time is lavapipe compiling shaders (LLVM, 75 % of a cold run's samples; its
# shader cache then serves later runs), and most of that is LLVM building the coroutines that stand for the kernels'
# barriers. GALLIVM_PERF=nopt skips LLVM's optimisation passes: on 2 cores (2026-12-07) a cold
# test_kernels_quant_prompt_k took 5 min 3 s of CPU with it against 8 min 12 s without, an IQ4_NL type's decode
# products 232 s against 324 s. LP_NATIVE_VECTOR_WIDTH=128 makes lavapipe's shaders 4 lanes wide instead of AVX2's 8
# (subgroups of 4, which the kernels' subgroup paths must handle as they do 32 or 64): cold, with nopt, an IQ4_NL
# type's products took 78 s of CPU against 196 s and test_graph_awq 69 s against 145 s (the two run side by side).
# A GPU ignores both; set either to keep another value.
export GALLIVM_PERF=${GALLIVM_PERF-nopt}
export LP_NATIVE_VECTOR_WIDTH=${LP_NATIVE_VECTOR_WIDTH-128}
# Mesa and Dawn are not instrumented; their leaks at exit are suppressed (file says which and why).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=$root/tests/support/lsan_suppressions.txt:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

part_names=() part_times=() part_results=() failed=0
run_part() {  # NAME COMMAND...: runs and times one part
  local name=$1 start=$SECONDS status=0
  shift
  echo "[test] === $name ==="
  "$@" || status=$?
  part_names+=("$name") part_times+=($((SECONDS - start)))
  if [ $status = 0 ]; then part_results+=(ok); else part_results+=("FAILED ($status)"); failed=1; fi
}

release_tests() {
  cmake --build build -j "$jobs" &&
  build/gerbil info &&
  ctest --test-dir build --output-on-failure -j "${GERBIL_TEST_JOBS:-$jobs}" "$@"
}

sanitized_tests() {
  if [ ! -f build-asan/build.ninja ]; then
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
          -DGERBIL_SANITIZE=ON \
          -DGERBIL_BUILD_BENCH=OFF $(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) \
          >/dev/null || return
  fi
  cmake --build build-asan -j "$jobs" --target "${sanitized_tests[@]}" || return
  local regex
  regex="^($(IFS='|'; echo "${sanitized_tests[*]}"))\$"
  ctest --test-dir build-asan --output-on-failure -j "${GERBIL_TEST_JOBS:-$jobs}" -R "$regex"
}

run_part tests release_tests "$@"
run_part sanitized sanitized_tests
if [ "$fuzz_seconds" != 0 ]; then run_part fuzz scripts/fuzz.sh "$fuzz_seconds"; fi

echo
printf '[test] %-10s %8s  %s\n' part seconds result
for i in "${!part_names[@]}"; do
  printf '[test] %-10s %8s  %s\n' "${part_names[$i]}" "${part_times[$i]}" "${part_results[$i]}"
done
exit $failed
