// Checks kernels against their float64 CPU references (src/reference/) on fresh random inputs. Used by
// the unit tests (tests/test_kernels_*.cpp) and by `gerbil selftest`, so both check exactly the same way:
// outputs are poisoned with NaN before the kernel runs (an unwritten element makes the error NaN, which
// fails), and the error is the relative L2 error ||gpu - ref|| / ||ref||.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu/device.h"

namespace gerbil::kernels {

struct CaseResult {
  std::string kernel;
  std::string shape;
  double relative_error = 0;  // NaN when an output element was left unwritten
  double bound = 0;
  bool passed() const { return relative_error < bound; }  // false for NaN
};

using Rng = std::mt19937_64;

// One kernel's check: a name, the error bound it must meet and why, and its cases.
struct KernelCheck {
  std::string kernel;
  double bound;
  std::string why;  // the reason for the bound, printed by `gerbil selftest --verbose`
  std::vector<std::string> shapes;
  std::function<CaseResult(gpu::Device&, Rng&, size_t shape_index)> run;
  // An adapter feature the kernel cannot run without ("shader-f16"), or empty; see missing_feature().
  std::string needs;
};

// The feature `check` needs that `device` lacks, or empty when it can run: `gerbil selftest` reports a check
// it cannot run as skipped, and the unit tests skip it.
std::string missing_feature(const gpu::Device& device, const KernelCheck& check);

// Every kernel check, seed kernels first. `quick` drops the largest shapes.
std::vector<KernelCheck> kernel_checks(bool quick = false);
// The checks of the model kernels (kernels/model.h), defined in model_checks.cpp.
std::vector<KernelCheck> model_kernel_checks(bool quick);

// Runs one check over all its shapes.
std::vector<CaseResult> run_check(gpu::Device& device, const KernelCheck& check, uint64_t seed);

}  // namespace gerbil::kernels
