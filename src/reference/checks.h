// Internal to src/reference/: the argument checks and scalar activations both reference files use.
#pragma once

#include <cmath>
#include <cstddef>
#include <numbers>

#include "gerbil/error.h"

namespace gerbil::reference::detail {

// Throws unless `tensor` of reference function `function` holds exactly `expected` elements.
inline void expect_size(const char* function, const char* tensor, size_t actual, size_t expected) {
  if (actual != expected)
    fail("reference::{}: {} has {} elements, expected {}", function, tensor, actual, expected);
}

inline void expect_positive(const char* function, const char* argument, size_t value) {
  if (value == 0) fail("reference::{}: {} must be positive", function, argument);
}

inline double silu_at(double x) { return x / (1.0 + std::exp(-x)); }

// 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)); the second form keeps its digits where tanh(u) is near -1,
// which even double loses for x < -6.
inline double gelu_tanh_at(double x) {
  double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

}  // namespace gerbil::reference::detail
