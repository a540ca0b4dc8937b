// The WebGPU device the GPU test suites share: one per test process, opened on first use (opening one costs
// an adapter request and a device, and Dawn caches compiled pipelines per device).
#pragma once

#include "gpu/device.h"

namespace gerbil::test {

inline gpu::Device& device() {
  static gpu::Device shared;
  return shared;
}

// The figures the dispatch rules were fitted with: an H200's 132 SMs, 8 light workgroups or 2 linear_tiled ones
// each. A device given them (set_tuning) takes the shapes an H200 takes wherever its own limits allow.
constexpr gpu::Tuning kH200{.resident_workgroups = 1056, .resident_tiles = 264};

}  // namespace gerbil::test
