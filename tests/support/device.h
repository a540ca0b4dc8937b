// The WebGPU device the GPU test suites share: one per test process, opened on first use (opening one costs
// an adapter request and a device, and Dawn caches compiled pipelines per device).
#pragma once

#include "gpu/device.h"

namespace gerbil::test {

inline gpu::Device& device() {
  static gpu::Device shared;
  return shared;
}

}  // namespace gerbil::test
