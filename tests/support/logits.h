// Reading reference logits and comparing rows of them, for the model tests that check gerbil's logits
// against float64 references (the fixtures and tests/data/long).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "support/paths.h"

namespace gerbil::test {

// A raw little-endian float32 file, as the references store logits.
inline std::vector<float> read_f32(const std::filesystem::path& path) {
  std::string bytes = read_text(path);
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

// ||got - want|| / ||want|| over one row; NaN when got holds a NaN.
inline double relative_error(std::span<const float> got, std::span<const float> want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return NAN;
    diff += double(got[i] - want[i]) * double(got[i] - want[i]);
    norm += double(want[i]) * double(want[i]);
  }
  return std::sqrt(diff / norm);
}

inline size_t argmax(std::span<const float> row) {
  return size_t(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace gerbil::test
