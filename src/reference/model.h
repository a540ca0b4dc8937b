// Float64 CPU references of the model kernels (src/kernels/model.h): the same semantics, shapes and
// layouts, written as plainly as possible. Conventions as in reference.h: row-major tensors, float data as
// double (16-bit weights passed as their exact values), integer data as uint32_t, and a size that does not
// match the shape arguments throws gerbil::Error naming the function and the argument. Kernels that leave
// part of their output alone take that output's prior contents (`out`, the caches) and return it updated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gerbil::reference {

// One vocabulary block of an embedding table (table is [rows, D] for the ids [vocab_offset, +rows)):
// out[t, d] = scale * table[ids[t] - vocab_offset, d] (+ positions[position_offset + t - first_row, d] when
// positions is not empty) for the tokens t in [first_row, first_row + T) of the block; the rows of other tokens
// keep their value in `out` [ids.size(), D].
std::vector<double> embed(std::span<const uint32_t> ids, std::span<const double> table,
                          std::span<const double> positions, size_t first_row, size_t T, size_t D,
                          size_t vocab_offset, double scale, size_t position_offset, std::vector<double> out);

// out[m, out_col + n] = sum_k x[m, k] W[n, k] + bias[n] + residual[m, out_col + n] for n < N, with W [N, K]
// and `out` [M, out_stride]; an empty bias or residual is left out, other columns of `out` keep their value.
std::vector<double> linear(std::span<const double> x, std::span<const double> W, std::span<const double> bias,
                           std::span<const double> residual, size_t M, size_t K, size_t N, size_t out_stride,
                           size_t out_col, std::vector<double> out);

// The [N, K] (nn.Linear layout) weight of a GPTQ int4 layer with "v1" zero points:
// W[n, k] = scales[g, n] * (q[k, n] - (z[g, n] + 1)), g = g_idx[k] (act-order) or, with g_idx empty,
// k / group_size; q[k, n] = bits 4*(k%8) of qweight[k/8, n], z[g, n] = bits 4*(n%8) of qzeros[g, n/8];
// scales [K / group_size, N].
std::vector<double> dequantize_gptq(std::span<const uint32_t> qweight, std::span<const uint32_t> qzeros,
                                    std::span<const double> scales, size_t K, size_t N, size_t group_size,
                                    std::span<const int32_t> g_idx = {});

enum class Activation : uint32_t { Silu = 0, GeluTanh = 1 };

// out[t, i] = act(gate_up[t, i]) * gate_up[t, I + i]; gate_up is [T, 2I]. GELU-tanh is evaluated as
// x / (1 + exp(-2u)), equal to 0.5 x (1 + tanh(u)) but free of its cancellation for negative x.
std::vector<double> gated_act(std::span<const double> gate_up, size_t T, size_t I, Activation act);

struct QkvShape {
  size_t T, num_q_heads, num_kv_heads, head_dim;
  size_t rotary_dim;  // 0: no rotary
  size_t position_offset;
  bool f16_cache = false;  // the stored k and v rows are rounded to f16 (round_to_f16), as an f16 KV cache keeps them
};

// The f16 value nearest x (ties to even), as an f16 KV cache stores it: 11 significant bits in the normal range,
// steps of 2^-24 below it, infinite from 65520 on; NaN stays NaN.
double round_to_f16(double x);

struct QkvRopeOutput {
  std::vector<double> q;        // [T, num_q_heads * head_dim]
  std::vector<double> k_cache;  // [capacity, num_kv_heads * head_dim]
  std::vector<double> v_cache;
};

// Splits qkv [T, (Hq + 2 Hkv) * head_dim] into q, k, v heads; RMS-normalises q and k heads with q_norm /
// k_norm [head_dim] when they are not empty; rotates the first rotary_dim dims of q and k heads in
// rotate-half style (pair (i, i + r/2), angle (position_offset + t) * rope_table[i], scaled by the attention
// factor rope_table[r/2]: the table holds r/2 + 1 values, one for GPT-2's r = 0); stores k and v at
// rows position_offset + t of the caches (rounded to f16 with f16_cache), whose other rows keep their value.
QkvRopeOutput qkv_rope_store(std::span<const double> qkv, std::span<const double> q_norm,
                             std::span<const double> k_norm, std::span<const double> rope_table,
                             const QkvShape& s, double eps, std::vector<double> k_cache,
                             std::vector<double> v_cache);

// Causal grouped-query attention with a sliding window and a given score scale: query t at position
// p = position_offset + t attends keys j with max(0, p - window + 1) <= j <= p (window 0: no window);
// Q [T, Hq * head_dim], K and V [S, Hkv * head_dim]. Returns [T, Hq * head_dim].
std::vector<double> flash_attention(std::span<const double> Q, std::span<const double> K,
                                    std::span<const double> V, size_t T, size_t S, size_t num_q_heads,
                                    size_t num_kv_heads, size_t head_dim, size_t position_offset,
                                    size_t window, double scale);

// The index of the largest value, the lowest on ties; NaN never wins (all NaN: 0).
size_t argmax(std::span<const double> values);

// The logits with those of the ids not allowed (bit i % 32 of allowed[i / 32] clear) made NaN, which no picker
// takes: what a constrained step's pick reads (kernels::mask_tokens).
std::vector<double> mask_tokens(std::span<const double> logits, std::span<const uint32_t> allowed);

// The probability of drawing each token under temperature, top-k (0: off), top-p and min-p sampling as
// generate/sampler.cpp defines them: candidates in order of higher logit, then lower index (NaN excluded);
// probabilities over the top_k; top-p keeps the shortest prefix reaching top_p; min-p drops those below
// min_p times the best's probability; infinities clamped to the largest finite floats. Zero for the tokens
// not kept.
std::vector<double> sampling_probabilities(std::span<const double> logits, double temperature, size_t top_k,
                                           double top_p, double min_p);

// The logits after generate/sampler.cpp's penalties for tokens seen counts[i] > 0 times: divided (if
// positive) or multiplied by `repetition`, then lowered by presence + frequency * counts[i].
std::vector<double> penalized_logits(std::span<const double> logits, std::span<const uint32_t> counts,
                                     double repetition, double presence, double frequency);

}  // namespace gerbil::reference
