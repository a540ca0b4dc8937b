#!/usr/bin/env bash
# Runs every test (GoogleTest suites through CTest) on the default WebGPU adapter: Mesa lavapipe on a
# machine without a GPU. Fixtures are read from ../shared/fixtures; suites that need them skip, saying so,
# when that folder is absent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -x build/gerbil ] || { echo "[test] build/gerbil missing: run scripts/setup.sh first" >&2; exit 1; }
cmake --build build -j "$(nproc)"
build/gerbil info
ctest --test-dir build --output-on-failure -j "${GERBIL_TEST_JOBS:-$(nproc)}" "$@"
