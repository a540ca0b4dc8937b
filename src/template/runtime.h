// Sandbox limits and the per-render state that builtins and the interpreter share.
#pragma once

#include <cstddef>

#include "gerbil/error.h"

namespace gerbil::jinja {

struct Limits {
  size_t max_iterations = 1'000'000;    // loop iterations, range() and repetition sizes, summed over a render
  size_t max_output_bytes = 64u << 20;  // the rendered text, and any one string or list built on the way
  int max_call_depth = 64;              // nested macro calls
  size_t max_work_bytes = 1u << 30;     // bytes of strings and list items built, summed over a render
};

struct Runtime {
  Limits limits;
  size_t iterations = 0;
  size_t work_bytes = 0;
  int call_depth = 0;

  void count_iterations(size_t n) {
    iterations += n;
    if (iterations > limits.max_iterations)
      fail("the template exceeded the sandbox limit of {} loop iterations", limits.max_iterations);
  }
  // Bounds the time a render can take: loops are bounded in count, this bounds the work done in each.
  void count_work(size_t bytes) {
    work_bytes += bytes;
    if (work_bytes > limits.max_work_bytes)
      fail("the template built more than the sandbox limit of {} bytes of strings and lists",
           limits.max_work_bytes);
  }
  void check_size(size_t bytes) const {
    if (bytes > limits.max_output_bytes)
      fail("the template output exceeded the sandbox limit of {} bytes", limits.max_output_bytes);
  }
};

}  // namespace gerbil::jinja
