// Float64 CPU references of the twelve seed kernels (src/kernels/wgsl/*.wgsl): the same semantics,
// shapes and layouts, written as plainly as possible so that a GPU result can be checked against them.
// Tensors are row-major; float data comes in as double (callers convert their f32 test data), integer
// data (token ids, packed int4 words) as uint32_t. A size that does not match the shape arguments, or a
// value outside its valid range, throws gerbil::Error naming the function and the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gerbil::reference {

// output[t, d] = weight[ids[t], d]; weight is [vocab, D] with vocab = weight.size() / D.
std::vector<double> embedding(std::span<const uint32_t> ids, std::span<const double> weight, size_t T,
                              size_t D);

// C[M, N] = A[M, K] * B[K, N].
std::vector<double> matmul(std::span<const double> A, std::span<const double> B, size_t M, size_t K,
                           size_t N);

// Packs 4-bit values (each < 16) eight to a uint32, value i in bits 4*(i % 8) of word i / 8: the lowest
// bits hold the lowest index. A last partial word is zero-padded.
std::vector<uint32_t> pack_int4(std::span<const uint8_t> nibbles);

// The [K, N] matrix stored as packed int4: element flat = k*N + n is
// (nibble(flat) - zeros[flat / group_size]) * scales[flat / group_size].
std::vector<double> dequantize_int4(std::span<const uint32_t> packed, std::span<const double> scales,
                                    std::span<const double> zeros, size_t K, size_t N, size_t group_size);

// C[M, N] = A[M, K] * dequantize_int4(packed, scales, zeros, K, N, group_size).
std::vector<double> matmul_int4(std::span<const double> A, std::span<const uint32_t> packed,
                                std::span<const double> scales, std::span<const double> zeros, size_t M,
                                size_t K, size_t N, size_t group_size);

// output[t, d] = x[t, d] / sqrt(mean_d(x[t, :]^2) + eps) * w[d]; x is [T, D].
std::vector<double> rmsnorm(std::span<const double> x, std::span<const double> w, size_t T, size_t D,
                            double eps);

// output[t, d] = (x[t, d] - mean) / sqrt(variance + eps) * w[d] + b[d], with the biased (1/D) variance.
std::vector<double> layernorm(std::span<const double> x, std::span<const double> w, std::span<const double> b,
                              size_t T, size_t D, double eps);

struct RopeOutput {
  std::vector<double> q;  // [T, num_q_heads * head_dim]
  std::vector<double> k;  // [T, num_kv_heads * head_dim]
};

// Interleaved rotary embedding: in every head, pair i rotates elements (2i, 2i+1) by
// theta = (position_offset + t) * base^(-2i / head_dim).
RopeOutput rope(std::span<const double> q, std::span<const double> k, size_t T, size_t num_q_heads,
                size_t num_kv_heads, size_t head_dim, double base, size_t position_offset);

// Causal grouped-query attention. Q is [T, num_q_heads * head_dim], K and V are [S, num_kv_heads * head_dim];
// query t sits at position position_offset + t and attends keys j <= position_offset + t (j < S), with
// scores scaled by 1/sqrt(head_dim); q head h reads kv head h / (num_q_heads / num_kv_heads).
// Returns [T, num_q_heads * head_dim].
std::vector<double> attention(std::span<const double> Q, std::span<const double> K, std::span<const double> V,
                              size_t T, size_t S, size_t num_q_heads, size_t num_kv_heads, size_t head_dim,
                              size_t position_offset);

// Softmax of each row of the [rows, cols] matrix x.
std::vector<double> softmax(std::span<const double> x, size_t rows, size_t cols);

// x * sigmoid(x), element-wise.
std::vector<double> silu(std::span<const double> x);

// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), element-wise.
std::vector<double> gelu_tanh(std::span<const double> x);

// a + b and a * b, element-wise; a and b have the same size.
std::vector<double> add(std::span<const double> a, std::span<const double> b);
std::vector<double> mul(std::span<const double> a, std::span<const double> b);

}  // namespace gerbil::reference
