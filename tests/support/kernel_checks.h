// The one way the kernel test suites run a kernel's check (checks/selftest.h) under GoogleTest: fresh
// random inputs (the seed is printed on failure), every shape's relative error within the check's bound.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checks/selftest.h"

namespace gerbil::test {

// Whether a CPU adapter (lavapipe, ~1 GFLOP/s) runs the device: the checks' largest shapes would take
// minutes there, so tests take the quick shape lists and leave the rest to `gerbil selftest`.
inline bool cpu_adapter(const gpu::Device& device) { return device.adapter().adapter_type == "CPU"; }

inline void expect_check_passes(gpu::Device& device, const std::vector<kernels::KernelCheck>& checks,
                                const std::string& kernel) {
  uint64_t seed = std::random_device{}();
  for (const auto& check : checks) {
    if (check.kernel != kernel) continue;
    if (std::string missing = kernels::missing_feature(device, check); !missing.empty())
      GTEST_SKIP() << kernel << " needs " << missing << ", which " << device.adapter().summary() << " lacks";
    SCOPED_TRACE("seed " + std::to_string(seed) + "; bound: " + check.why);
    for (const auto& result : kernels::run_check(device, check, seed))
      EXPECT_TRUE(result.passed()) << result.shape << ": relative error " << result.relative_error << " > "
                                   << result.bound;
    return;
  }
  FAIL() << "no check for kernel " << kernel;
}

}  // namespace gerbil::test
