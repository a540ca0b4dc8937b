// Helpers for writing kernel checks (see selftest.h): random inputs, NaN-poisoned outputs, the relative
// error against a float64 reference, and make_check() to declare a check over a list of shapes.
#pragma once

#include <cmath>
#include <deque>
#include <limits>

#include "checks/selftest.h"

namespace gerbil::kernels::check {

inline std::vector<float> random_floats(Rng& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

inline std::vector<uint32_t> random_ints(Rng& rng, size_t n, uint32_t below) {
  std::uniform_int_distribution<uint32_t> dist(0, below - 1);
  std::vector<uint32_t> values(n);
  for (uint32_t& v : values) v = dist(rng);
  return values;
}

inline std::vector<double> widen(const std::vector<float>& values) { return {values.begin(), values.end()}; }

inline double relative_error(const std::vector<float>& gpu, const std::vector<double>& ref) {
  if (gpu.size() != ref.size()) return std::numeric_limits<double>::quiet_NaN();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = static_cast<double>(gpu[i]) - ref[i];
    if (std::isnan(gpu[i])) return std::numeric_limits<double>::quiet_NaN();
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Test buffers: inputs uploaded from host data, outputs filled with NaN so unwritten elements show.
struct Buffers {
  gpu::Device& device;
  std::deque<gpu::Buffer> owned;  // a deque: references stay valid as buffers are added

  template <typename T>
  const gpu::Buffer& input(const char* name, const std::vector<T>& values) {
    owned.push_back(device.upload(name, std::span<const T>(values)));
    return owned.back();
  }
  const gpu::Buffer& poisoned(const char* name, size_t n) {
    return input(name, std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
  }
  std::vector<float> read(const gpu::Buffer& buffer, size_t n) { return device.read_as<float>(buffer, 0, n); }
};

inline CaseResult result(const std::string& kernel, std::string shape, const std::vector<float>& gpu,
                  const std::vector<double>& ref, double bound) {
  return {kernel, std::move(shape), relative_error(gpu, ref), bound};
}

template <typename Shape>
inline KernelCheck make_check(std::string kernel, double bound, std::string why, std::vector<Shape> shapes,
                       std::function<std::string(const Shape&)> describe,
                       std::function<CaseResult(gpu::Device&, Rng&, const Shape&)> run) {
  KernelCheck check{std::move(kernel), bound, std::move(why), {}, {}};
  for (auto& shape : shapes) check.shapes.push_back(describe(shape));
  check.run = [shapes, run](gpu::Device& device, Rng& rng, size_t index) { return run(device, rng, shapes[index]); };
  return check;
}

}  // namespace gerbil::kernels::check
