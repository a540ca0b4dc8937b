# The test suites that open a GPU device, run on the H200 (NVIDIA's Vulkan driver, where CI has lavapipe). Carry
# .device/gpu_tests.tar.xz (xz: the device machines have it, not always zstd), made on the development machine from
# the build's test binaries (stripped) and the fixtures:
#   mkdir -p /tmp/gt/tests && for t in SUITE...; do strip -o /tmp/gt/tests/$t build/tests/$t; done
#   cp -r ../shared/fixtures /tmp/gt/ && tar c -C /tmp/gt tests fixtures | xz -T0 -6 > .device/gpu_tests.tar.xz
# Usage (from the project root, on the device): bash bench/device/gpu_tests.sh [GTEST_FILTER]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mkdir -p /tmp/gt && tar xJf .device/gpu_tests.tar.xz -C /tmp/gt
# CI=true: a missing fixture fails. The suites look for tracked data (tests/data) under the source folder they
# were built in.
export GERBIL_FIXTURES=/tmp/gt/fixtures CI=true
built_in=/work/main
[ -e "$built_in" ] || { mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; }
for t in /tmp/gt/tests/*; do
  section "$(basename "$t")"
  timeout 300 "$t" --gtest_brief=1 --gtest_filter="${1:-*}" 2>&1 | tail -25
done
