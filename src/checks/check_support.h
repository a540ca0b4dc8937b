// Helpers for writing kernel checks (see selftest.h): random inputs, NaN-poisoned outputs, the relative
// error against a float64 reference, and make_check() to declare a check over a list of shapes.
#pragma once

#include <algorithm>
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

// The rotary table of `rotary_dim` dims with base 10,000 (kernels::rope_table_length values): 10000^(-2i / rotary_dim)
// for i < rotary_dim / 2, then an attention factor of 1.1875 rather than 1, so that a kernel that skips it fails.
inline std::vector<float> rope_table(uint32_t rotary_dim) {
  std::vector<float> table;
  for (uint32_t i = 0; i < rotary_dim / 2; ++i) table.push_back(std::pow(10000.f, -2.f * float(i) / float(rotary_dim)));
  table.push_back(1.1875f);
  return table;
}

// Sequences' KV-cache rows laid out in one pool of blocks through scrambled block tables (kv_blocks.wgsl): the
// pool has `spare` more blocks than the tables take, handed out in random order and alternately to the
// sequences, so no table is contiguous or in order and the tables interleave. Rows move between a sequence's
// logical order and the pool with scatter() / gather(), in any unit (values, or words of `per_word` elements).
struct ScrambledBlocks {
  uint32_t block_tokens = 0, pool_blocks = 0;
  std::vector<uint32_t> table;        // every sequence's table, one after another
  std::vector<uint32_t> table_base;   // each sequence's first entry in `table`

  // The pool row of token j of sequence `seq`.
  size_t row_of(size_t seq, size_t j) const {
    return size_t(table[table_base[seq] + j / block_tokens]) * block_tokens + j % block_tokens;
  }
  size_t pool_rows() const { return size_t(pool_blocks) * block_tokens; }
  // The sequence's first `rows` logical rows of `width` units each into `pool`.
  template <typename T>
  void scatter(size_t seq, const std::vector<T>& logical, size_t rows, size_t width, std::vector<T>& pool) const {
    for (size_t j = 0; j < rows; ++j)
      std::copy_n(logical.begin() + std::ptrdiff_t(j * width), width, pool.begin() + std::ptrdiff_t(row_of(seq, j) * width));
  }
  template <typename T>
  std::vector<T> gather(size_t seq, const std::vector<T>& pool, size_t rows, size_t width) const {
    std::vector<T> logical(rows * width);
    for (size_t j = 0; j < rows; ++j)
      std::copy_n(pool.begin() + std::ptrdiff_t(row_of(seq, j) * width), width, logical.begin() + std::ptrdiff_t(j * width));
    return logical;
  }
};

// Tables for sequences of tokens[i] tokens each in blocks of `block_tokens`.
inline ScrambledBlocks scrambled_blocks(Rng& rng, const std::vector<size_t>& tokens, uint32_t block_tokens,
                                        uint32_t spare = 3) {
  ScrambledBlocks b;
  b.block_tokens = block_tokens;
  std::vector<size_t> needed;
  size_t total = spare;
  for (size_t n : tokens) total += needed.emplace_back(std::max<size_t>(1, (n + block_tokens - 1) / block_tokens));
  b.pool_blocks = uint32_t(total);
  std::vector<uint32_t> order(total);
  for (uint32_t i = 0; i < total; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<uint32_t>> tables(tokens.size());
  size_t next = 0;
  for (size_t round = 0; next < total - spare; ++round)
    for (size_t seq = 0; seq < tokens.size(); ++seq)
      if (round < needed[seq]) tables[seq].push_back(order[next++]);
  for (const auto& t : tables) {
    b.table_base.push_back(uint32_t(b.table.size()));
    b.table.insert(b.table.end(), t.begin(), t.end());
  }
  return b;
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
