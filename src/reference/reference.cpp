#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "gerbil/error.h"
#include "reference/checks.h"

namespace gerbil::reference {
namespace {

using detail::expect_positive;
using detail::expect_size;

template <typename Op>
std::vector<double> map(std::span<const double> x, Op op) {
  std::vector<double> out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), op);
  return out;
}

template <typename Op>
std::vector<double> zip(const char* function, std::span<const double> a, std::span<const double> b, Op op) {
  expect_size(function, "b", b.size(), a.size());
  std::vector<double> out(a.size());
  std::transform(a.begin(), a.end(), b.begin(), out.begin(), op);
  return out;
}

// Rotates the pairs (2i, 2i+1) of every head of one token's row [num_heads * head_dim] in place.
void rotate_row(double* row, size_t num_heads, size_t head_dim, double base, double position) {
  for (size_t h = 0; h < num_heads; ++h) {
    for (size_t i = 0; i < head_dim / 2; ++i) {
      double theta = position * std::pow(base, -2.0 * double(i) / double(head_dim));
      double* pair = row + h * head_dim + 2 * i;
      double x0 = pair[0], x1 = pair[1];
      pair[0] = x0 * std::cos(theta) - x1 * std::sin(theta);
      pair[1] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

}  // namespace

std::vector<double> embedding(std::span<const uint32_t> ids, std::span<const double> weight, size_t T,
                              size_t D) {
  expect_positive("embedding", "D", D);
  expect_size("embedding", "ids", ids.size(), T);
  if (weight.size() % D != 0)
    fail("reference::embedding: weight has {} elements, not a whole number of rows of D = {}", weight.size(),
         D);
  size_t vocab = weight.size() / D;
  std::vector<double> out(T * D);
  for (size_t t = 0; t < T; ++t) {
    if (ids[t] >= vocab)
      fail("reference::embedding: ids[{}] = {} is outside the vocabulary of {} rows", t, ids[t], vocab);
    std::copy_n(weight.begin() + ids[t] * D, D, out.begin() + t * D);
  }
  return out;
}

std::vector<double> matmul(std::span<const double> A, std::span<const double> B, size_t M, size_t K,
                           size_t N) {
  expect_size("matmul", "A", A.size(), M * K);
  expect_size("matmul", "B", B.size(), K * N);
  std::vector<double> C(M * N, 0.0);
  for (size_t m = 0; m < M; ++m)
    for (size_t k = 0; k < K; ++k)
      for (size_t n = 0; n < N; ++n) C[m * N + n] += A[m * K + k] * B[k * N + n];
  return C;
}

std::vector<uint32_t> pack_int4(std::span<const uint8_t> nibbles) {
  std::vector<uint32_t> words((nibbles.size() + 7) / 8, 0);
  for (size_t i = 0; i < nibbles.size(); ++i) {
    if (nibbles[i] > 15) fail("reference::pack_int4: nibbles[{}] = {} does not fit in 4 bits", i, nibbles[i]);
    words[i / 8] |= uint32_t(nibbles[i]) << (4 * (i % 8));
  }
  return words;
}

std::vector<double> dequantize_int4(std::span<const uint32_t> packed, std::span<const double> scales,
                                    std::span<const double> zeros, size_t K, size_t N, size_t group_size) {
  expect_positive("dequantize_int4", "group_size", group_size);
  size_t count = K * N;
  size_t groups = (count + group_size - 1) / group_size;
  expect_size("dequantize_int4", "packed", packed.size(), (count + 7) / 8);
  expect_size("dequantize_int4", "scales", scales.size(), groups);
  expect_size("dequantize_int4", "zeros", zeros.size(), groups);
  std::vector<double> B(count);
  for (size_t flat = 0; flat < count; ++flat) {
    double nibble = double((packed[flat / 8] >> (4 * (flat % 8))) & 0xFu);
    size_t group = flat / group_size;
    B[flat] = (nibble - zeros[group]) * scales[group];
  }
  return B;
}

std::vector<double> matmul_int4(std::span<const double> A, std::span<const uint32_t> packed,
                                std::span<const double> scales, std::span<const double> zeros, size_t M,
                                size_t K, size_t N, size_t group_size) {
  std::vector<double> B = dequantize_int4(packed, scales, zeros, K, N, group_size);
  return matmul(A, B, M, K, N);
}

std::vector<double> rmsnorm(std::span<const double> x, std::span<const double> w, size_t T, size_t D,
                            double eps) {
  expect_positive("rmsnorm", "D", D);
  expect_size("rmsnorm", "x", x.size(), T * D);
  expect_size("rmsnorm", "w", w.size(), D);
  std::vector<double> out(T * D);
  for (size_t t = 0; t < T; ++t) {
    const double* row = x.data() + t * D;
    double sum_sq = 0.0;
    for (size_t d = 0; d < D; ++d) sum_sq += row[d] * row[d];
    double rms = std::sqrt(sum_sq / double(D) + eps);
    for (size_t d = 0; d < D; ++d) out[t * D + d] = row[d] / rms * w[d];
  }
  return out;
}

std::vector<double> layernorm(std::span<const double> x, std::span<const double> w, std::span<const double> b,
                              size_t T, size_t D, double eps) {
  expect_positive("layernorm", "D", D);
  expect_size("layernorm", "x", x.size(), T * D);
  expect_size("layernorm", "w", w.size(), D);
  expect_size("layernorm", "b", b.size(), D);
  std::vector<double> out(T * D);
  for (size_t t = 0; t < T; ++t) {
    const double* row = x.data() + t * D;
    double mean = 0.0;
    for (size_t d = 0; d < D; ++d) mean += row[d];
    mean /= double(D);
    double variance = 0.0;
    for (size_t d = 0; d < D; ++d) variance += (row[d] - mean) * (row[d] - mean);
    variance /= double(D);
    double inv_std = 1.0 / std::sqrt(variance + eps);
    for (size_t d = 0; d < D; ++d) out[t * D + d] = (row[d] - mean) * inv_std * w[d] + b[d];
  }
  return out;
}

RopeOutput rope(std::span<const double> q, std::span<const double> k, size_t T, size_t num_q_heads,
                size_t num_kv_heads, size_t head_dim, double base, size_t position_offset) {
  expect_positive("rope", "head_dim", head_dim);
  if (head_dim % 2 != 0)
    fail("reference::rope: head_dim = {} is odd; rotary pairs need an even one", head_dim);
  if (!(base > 0.0)) fail("reference::rope: base = {} must be positive", base);
  expect_size("rope", "q", q.size(), T * num_q_heads * head_dim);
  expect_size("rope", "k", k.size(), T * num_kv_heads * head_dim);
  RopeOutput out{{q.begin(), q.end()}, {k.begin(), k.end()}};
  for (size_t t = 0; t < T; ++t) {
    double position = double(position_offset + t);
    rotate_row(out.q.data() + t * num_q_heads * head_dim, num_q_heads, head_dim, base, position);
    rotate_row(out.k.data() + t * num_kv_heads * head_dim, num_kv_heads, head_dim, base, position);
  }
  return out;
}

std::vector<double> attention(std::span<const double> Q, std::span<const double> K, std::span<const double> V,
                              size_t T, size_t S, size_t num_q_heads, size_t num_kv_heads, size_t head_dim,
                              size_t position_offset) {
  expect_positive("attention", "S", S);
  expect_positive("attention", "head_dim", head_dim);
  expect_positive("attention", "num_kv_heads", num_kv_heads);
  if (num_q_heads % num_kv_heads != 0)
    fail("reference::attention: num_q_heads = {} is not a multiple of num_kv_heads = {}", num_q_heads,
         num_kv_heads);
  size_t q_width = num_q_heads * head_dim, kv_width = num_kv_heads * head_dim;
  expect_size("attention", "Q", Q.size(), T * q_width);
  expect_size("attention", "K", K.size(), S * kv_width);
  expect_size("attention", "V", V.size(), S * kv_width);
  size_t group = num_q_heads / num_kv_heads;
  double scale = 1.0 / std::sqrt(double(head_dim));
  std::vector<double> out(T * q_width, 0.0);
  std::vector<double> scores(S);
  for (size_t t = 0; t < T; ++t) {
    size_t keys = std::min(position_offset + t + 1, S);  // the causal mask
    for (size_t h = 0; h < num_q_heads; ++h) {
      const double* q = Q.data() + t * q_width + h * head_dim;
      size_t kv_offset = (h / group) * head_dim;
      for (size_t j = 0; j < keys; ++j) {
        const double* k = K.data() + j * kv_width + kv_offset;
        double dot = 0.0;
        for (size_t d = 0; d < head_dim; ++d) dot += q[d] * k[d];
        scores[j] = dot * scale;
      }
      std::vector<double> weights = softmax(std::span(scores).first(keys), 1, keys);
      double* o = out.data() + t * q_width + h * head_dim;
      for (size_t j = 0; j < keys; ++j)
        for (size_t d = 0; d < head_dim; ++d) o[d] += weights[j] * V[j * kv_width + kv_offset + d];
    }
  }
  return out;
}

std::vector<double> softmax(std::span<const double> x, size_t rows, size_t cols) {
  expect_positive("softmax", "cols", cols);
  expect_size("softmax", "x", x.size(), rows * cols);
  std::vector<double> out(rows * cols);
  for (size_t r = 0; r < rows; ++r) {
    auto row = x.subspan(r * cols, cols);
    double max = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (double v : row) sum += std::exp(v - max);
    for (size_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(row[c] - max) / sum;
  }
  return out;
}

std::vector<double> silu(std::span<const double> x) { return map(x, detail::silu_at); }

std::vector<double> gelu_tanh(std::span<const double> x) { return map(x, detail::gelu_tanh_at); }

std::vector<double> add(std::span<const double> a, std::span<const double> b) {
  return zip("add", a, b, [](double x, double y) { return x + y; });
}

std::vector<double> mul(std::span<const double> a, std::span<const double> b) {
  return zip("mul", a, b, [](double x, double y) { return x * y; });
}

}  // namespace gerbil::reference
