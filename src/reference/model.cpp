#include "reference/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "gerbil/error.h"
#include "reference/checks.h"

namespace gerbil::reference {
namespace {

using detail::expect_positive;
using detail::expect_size;

// Bits 4*i .. 4*i+3 of word.
uint32_t nibble(uint32_t word, size_t i) { return (word >> (4 * i)) & 0xFu; }

// RMS-normalises `head` [D] in place with weight w (no-op when w is empty).
void rms_normalise(std::span<double> head, std::span<const double> w, double eps) {
  if (w.empty()) return;
  double sum_sq = 0;
  for (double v : head) sum_sq += v * v;
  double inv_rms = 1.0 / std::sqrt(sum_sq / double(head.size()) + eps);
  for (size_t d = 0; d < head.size(); ++d) head[d] *= inv_rms * w[d];
}

// Rotates the first rotary_dim dims of `head` in place, rotate-half style, at `position`, scaled by the table's
// attention factor (rope_table[rotary_dim / 2]).
void rotate_half(std::span<double> head, std::span<const double> rope_table, size_t rotary_dim,
                 double position) {
  size_t half = rotary_dim / 2;
  double scale = rope_table[half];
  for (size_t i = 0; i < half; ++i) {
    double angle = position * rope_table[i];
    double a = head[i], b = head[i + half];
    head[i] = scale * (a * std::cos(angle) - b * std::sin(angle));
    head[i + half] = scale * (b * std::cos(angle) + a * std::sin(angle));
  }
}

}  // namespace

std::vector<double> embed(std::span<const uint32_t> ids, std::span<const double> table,
                          std::span<const double> positions, size_t first_row, size_t T, size_t D,
                          size_t vocab_offset, double scale, size_t position_offset, std::vector<double> out) {
  expect_positive("embed", "D", D);
  if (first_row + T > ids.size())
    fail("reference::embed: tokens {}..{} lie past the {} ids", first_row, first_row + T - 1, ids.size());
  expect_size("embed", "out", out.size(), ids.size() * D);
  if (table.size() % D != 0)
    fail("reference::embed: table has {} elements, not a whole number of rows of D = {}", table.size(), D);
  if (!positions.empty() && positions.size() < (position_offset + T) * D)
    fail("reference::embed: positions has {} elements, fewer than the {} rows needed", positions.size(),
         position_offset + T);
  size_t rows = table.size() / D;
  for (size_t t = first_row; t < first_row + T; ++t) {
    if (ids[t] < vocab_offset || ids[t] >= vocab_offset + rows) continue;
    for (size_t d = 0; d < D; ++d) {
      double value = scale * table[(ids[t] - vocab_offset) * D + d];
      if (!positions.empty()) value += positions[(position_offset + t - first_row) * D + d];
      out[t * D + d] = value;
    }
  }
  return out;
}

std::vector<double> linear(std::span<const double> x, std::span<const double> W, std::span<const double> bias,
                           std::span<const double> residual, size_t M, size_t K, size_t N, size_t out_stride,
                           size_t out_col, std::vector<double> out) {
  expect_size("linear", "x", x.size(), M * K);
  expect_size("linear", "W", W.size(), N * K);
  if (!bias.empty()) expect_size("linear", "bias", bias.size(), N);
  if (!residual.empty()) expect_size("linear", "residual", residual.size(), M * out_stride);
  expect_size("linear", "out", out.size(), M * out_stride);
  if (out_col + N > out_stride)
    fail("reference::linear: columns [{}, {}) do not fit in out_stride {}", out_col, out_col + N, out_stride);
  for (size_t m = 0; m < M; ++m) {
    for (size_t n = 0; n < N; ++n) {
      double sum = 0;
      for (size_t k = 0; k < K; ++k) sum += x[m * K + k] * W[n * K + k];
      size_t o = m * out_stride + out_col + n;
      if (!bias.empty()) sum += bias[n];
      if (!residual.empty()) sum += residual[o];
      out[o] = sum;
    }
  }
  return out;
}

std::vector<double> dequantize_gptq(std::span<const uint32_t> qweight, std::span<const uint32_t> qzeros,
                                    std::span<const double> scales, size_t K, size_t N, size_t group_size,
                                    std::span<const int32_t> g_idx) {
  expect_positive("dequantize_gptq", "group_size", group_size);
  if (K % 8 != 0 || N % 8 != 0 || K % group_size != 0)
    fail("reference::dequantize_gptq: K = {} and N = {} must be multiples of 8 and K of group_size = {}", K,
         N, group_size);
  size_t groups = K / group_size;
  expect_size("dequantize_gptq", "qweight", qweight.size(), K / 8 * N);
  expect_size("dequantize_gptq", "qzeros", qzeros.size(), groups * N / 8);
  expect_size("dequantize_gptq", "scales", scales.size(), groups * N);
  if (!g_idx.empty()) expect_size("dequantize_gptq", "g_idx", g_idx.size(), K);
  for (int32_t g : g_idx)
    if (g < 0 || size_t(g) >= groups) fail("reference::dequantize_gptq: g_idx names group {} of {}", g, groups);
  std::vector<double> W(N * K);
  for (size_t n = 0; n < N; ++n) {
    for (size_t k = 0; k < K; ++k) {
      size_t g = g_idx.empty() ? k / group_size : size_t(g_idx[k]);
      double q = nibble(qweight[k / 8 * N + n], k % 8);
      double zero = nibble(qzeros[g * N / 8 + n / 8], n % 8) + 1.0;
      W[n * K + k] = scales[g * N + n] * (q - zero);
    }
  }
  return W;
}

std::vector<double> gated_act(std::span<const double> gate_up, size_t T, size_t I, Activation act) {
  expect_size("gated_act", "gate_up", gate_up.size(), T * 2 * I);
  if (act != Activation::Silu && act != Activation::GeluTanh)
    fail("reference::gated_act: activation {} is neither SiLU (0) nor GELU-tanh (1)",
         static_cast<uint32_t>(act));
  std::vector<double> out(T * I);
  for (size_t t = 0; t < T; ++t) {
    for (size_t i = 0; i < I; ++i) {
      double gate = gate_up[t * 2 * I + i];
      out[t * I + i] = (act == Activation::Silu ? detail::silu_at(gate) : detail::gelu_tanh_at(gate)) * gate_up[t * 2 * I + I + i];
    }
  }
  return out;
}

double round_to_f16(double x) {
  if (!std::isfinite(x) || x == 0) return x;
  constexpr double kSmallestNormal = 0x1p-14, kOverflow = 65520;  // halfway from 65504, the largest, to 2^16
  if (std::abs(x) >= kOverflow) return std::copysign(std::numeric_limits<double>::infinity(), x);
  // The spacing of f16 values around x: 2^(e - 10) for |x| in [2^e, 2^(e+1)), 2^-24 among the subnormals.
  double spacing = std::abs(x) < kSmallestNormal ? 0x1p-24 : std::ldexp(1.0, std::ilogb(x) - 10);
  return std::nearbyint(x / spacing) * spacing;  // the default rounding mode: to nearest, ties to even
}

QkvRopeOutput qkv_rope_store(std::span<const double> qkv, std::span<const double> q_norm,
                             std::span<const double> k_norm, std::span<const double> rope_table,
                             const QkvShape& s, double eps, std::vector<double> k_cache,
                             std::vector<double> v_cache) {
  size_t D = s.head_dim, Hq = s.num_q_heads, Hkv = s.num_kv_heads;
  expect_positive("qkv_rope_store", "head_dim", D);
  expect_positive("qkv_rope_store", "num_kv_heads", Hkv);
  if (s.rotary_dim % 2 != 0 || s.rotary_dim > D)
    fail("reference::qkv_rope_store: rotary_dim = {} must be even and at most head_dim = {}", s.rotary_dim,
         D);
  expect_size("qkv_rope_store", "qkv", qkv.size(), s.T * (Hq + 2 * Hkv) * D);
  if (q_norm.empty() != k_norm.empty())
    fail("reference::qkv_rope_store: q_norm and k_norm must both be given or both be empty");
  if (!q_norm.empty()) {
    expect_size("qkv_rope_store", "q_norm", q_norm.size(), D);
    expect_size("qkv_rope_store", "k_norm", k_norm.size(), D);
  }
  expect_size("qkv_rope_store", "rope_table", rope_table.size(), s.rotary_dim / 2 + 1);
  if (k_cache.size() % (Hkv * D) != 0 || k_cache.size() / (Hkv * D) < s.position_offset + s.T)
    fail("reference::qkv_rope_store: k_cache of {} elements has no row {}", k_cache.size(),
         s.position_offset + s.T - 1);
  expect_size("qkv_rope_store", "v_cache", v_cache.size(), k_cache.size());

  QkvRopeOutput out{std::vector<double>(s.T * Hq * D), std::move(k_cache), std::move(v_cache)};
  std::vector<double> head(D);
  for (size_t t = 0; t < s.T; ++t) {
    const double* row = qkv.data() + t * (Hq + 2 * Hkv) * D;
    size_t position = s.position_offset + t;
    for (size_t h = 0; h < Hq + Hkv; ++h) {
      bool is_q = h < Hq;
      std::copy_n(row + h * D, D, head.begin());
      rms_normalise(head, is_q ? q_norm : k_norm, eps);
      rotate_half(head, rope_table, s.rotary_dim, double(position));
      if (is_q) {
        std::copy(head.begin(), head.end(), out.q.begin() + (t * Hq + h) * D);
      } else {
        size_t j = h - Hq, cache_row = (position * Hkv + j) * D;
        auto stored = [&](double value) { return s.f16_cache ? round_to_f16(value) : value; };
        std::transform(head.begin(), head.end(), out.k_cache.begin() + cache_row, stored);
        std::transform(row + (Hq + Hkv + j) * D, row + (Hq + Hkv + j + 1) * D, out.v_cache.begin() + cache_row, stored);
      }
    }
  }
  return out;
}

std::vector<double> flash_attention(std::span<const double> Q, std::span<const double> K,
                                    std::span<const double> V, size_t T, size_t S, size_t num_q_heads,
                                    size_t num_kv_heads, size_t head_dim, size_t position_offset,
                                    size_t window, double scale) {
  expect_positive("flash_attention", "head_dim", head_dim);
  expect_positive("flash_attention", "num_kv_heads", num_kv_heads);
  if (num_q_heads % num_kv_heads != 0)
    fail("reference::flash_attention: num_q_heads = {} is not a multiple of num_kv_heads = {}", num_q_heads,
         num_kv_heads);
  if (position_offset + T > S)
    fail("reference::flash_attention: queries reach position {} but only S = {} keys exist",
         position_offset + T - 1, S);
  size_t q_width = num_q_heads * head_dim, kv_width = num_kv_heads * head_dim;
  expect_size("flash_attention", "Q", Q.size(), T * q_width);
  expect_size("flash_attention", "K", K.size(), S * kv_width);
  expect_size("flash_attention", "V", V.size(), S * kv_width);
  size_t group = num_q_heads / num_kv_heads;
  std::vector<double> out(T * q_width, 0.0);
  for (size_t t = 0; t < T; ++t) {
    size_t position = position_offset + t;
    size_t first = window != 0 && position + 1 > window ? position + 1 - window : 0;
    for (size_t h = 0; h < num_q_heads; ++h) {
      const double* q = Q.data() + t * q_width + h * head_dim;
      size_t kv_offset = (h / group) * head_dim;
      std::vector<double> scores;
      for (size_t j = first; j <= position; ++j) {
        double dot = 0;
        for (size_t d = 0; d < head_dim; ++d) dot += q[d] * K[j * kv_width + kv_offset + d];
        scores.push_back(dot * scale);
      }
      double max = *std::max_element(scores.begin(), scores.end());
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      double* o = out.data() + t * q_width + h * head_dim;
      for (size_t j = first; j <= position; ++j)
        for (size_t d = 0; d < head_dim; ++d)
          o[d] += scores[j - first] / sum * V[j * kv_width + kv_offset + d];
    }
  }
  return out;
}

std::vector<double> sampling_probabilities(std::span<const double> logits, double temperature, size_t top_k,
                                           double top_p, double min_p) {
  constexpr double kLargest = std::numeric_limits<float>::max();  // infinities clamped as the samplers do
  std::vector<double> clamped(logits.begin(), logits.end());
  for (double& v : clamped)
    if (!std::isnan(v)) v = std::clamp(v, -kLargest, kLargest);
  logits = clamped;
  std::vector<size_t> order;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  if (top_k > 0 && top_k < order.size()) order.resize(top_k);
  std::vector<double> p(logits.size(), 0.0);
  if (order.empty()) return p;
  std::vector<double> weight;
  double total = 0;
  for (size_t i : order) total += weight.emplace_back(std::exp((logits[i] - logits[order[0]]) / temperature));
  size_t cut = order.size();
  double cumulative = 0, kept = total;
  if (top_p < 1 || min_p > 0) kept = 0;
  for (size_t r = 0; r < order.size() && (top_p < 1 || min_p > 0); ++r) {
    if (r > 0 && weight[r] < min_p) {  // p < min_p * p(best): weights are relative to the best's, 1
      cut = r;
      break;
    }
    cumulative += weight[r] / total;
    kept += weight[r];
    if (cumulative >= top_p) {
      cut = r + 1;
      break;
    }
  }
  for (size_t r = 0; r < cut; ++r) p[order[r]] = weight[r] / kept;
  return p;
}

std::vector<double> penalized_logits(std::span<const double> logits, std::span<const uint32_t> counts,
                                     double repetition, double presence, double frequency) {
  std::vector<double> out(logits.begin(), logits.end());
  for (size_t i = 0; i < out.size() && i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    out[i] = out[i] > 0 ? out[i] / repetition : out[i] * repetition;
    out[i] -= presence + frequency * counts[i];
  }
  return out;
}

size_t argmax(std::span<const double> values) {
  size_t best = 0;
  bool found = false;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;
    if (!found || values[i] > values[best]) best = i, found = true;
  }
  return best;
}

std::vector<double> mask_tokens(std::span<const double> logits, std::span<const uint32_t> allowed) {
  std::vector<double> out(logits.begin(), logits.end());
  for (size_t i = 0; i < out.size(); ++i)
    if (!(allowed[i / 32] >> (i % 32) & 1)) out[i] = std::numeric_limits<double>::quiet_NaN();
  return out;
}

}  // namespace gerbil::reference
