// Typed dispatchers for the twelve seed kernels of ../shared/seed/kernels.md, one per kernel. Each
// Params struct mirrors the WGSL `struct Params` of its kernel byte for byte; each *_grid function is
// the reference's dispatch formula (1-D grids folded into y past 65535 workgroups, see fold()).
// Shapes are checked against the bound buffers before anything is recorded.
#pragma once

#include <bit>

#include "kernels/dispatch.h"

namespace gerbil::kernels {

inline uint32_t float_bits(float value) { return std::bit_cast<uint32_t>(value); }

// embedding.wgsl: output[t, d] = weight[input_ids[t], d]
struct EmbeddingParams {
  uint32_t seq_len, hidden_size;
};
Grid embedding_grid(const EmbeddingParams& p);
Dispatch embedding(gpu::Device& device, BufferBinding input_ids, BufferBinding weight, BufferBinding output,
                   const EmbeddingParams& p, uint32_t vocab_size);

// matmul.wgsl: C[M, N] = A[M, K] * B[K, N], 16x16 tiles
struct MatmulParams {
  uint32_t M, K, N;
};
Grid matmul_grid(const MatmulParams& p);
Dispatch matmul(gpu::Device& device, BufferBinding A, BufferBinding B, BufferBinding C, const MatmulParams& p);

// matmul_int4.wgsl: C[M, N] = A[M, K] * dequant(B_q[K, N]); 8 nibbles per u32, lowest bits first;
// element e = k * N + n belongs to group e / group_size: value = (nibble - zeros[g]) * scales[g]
struct MatmulInt4Params {
  uint32_t M, K, N, group_size;
};
Grid matmul_int4_grid(const MatmulInt4Params& p);
Dispatch matmul_int4(gpu::Device& device, BufferBinding A, BufferBinding B_q, BufferBinding scales,
                     BufferBinding zeros, BufferBinding C, const MatmulInt4Params& p);

// rmsnorm.wgsl: out[t, d] = x[t, d] / sqrt(mean(x[t, :]^2) + eps) * weight[d]
struct RmsNormParams {
  uint32_t seq_len, hidden_size, eps_bits, _pad = 0;
};
Grid rmsnorm_grid(const RmsNormParams& p);
Dispatch rmsnorm(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding output,
                 const RmsNormParams& p);

// layernorm.wgsl: out[t, d] = (x[t, d] - mean) / sqrt(var + eps) * weight[d] + bias[d]
struct LayerNormParams {
  uint32_t seq_len, hidden_size, eps_bits, _pad = 0;
};
Grid layernorm_grid(const LayerNormParams& p);
Dispatch layernorm(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding bias,
                   BufferBinding output, const LayerNormParams& p);

// rope.wgsl: rotates pairs (2i, 2i+1) of every q and k head in place by (position_offset + t) * base^(-2i/d)
struct RopeParams {
  uint32_t seq_len, num_q_heads, num_kv_heads, head_dim, rope_base_bits, position_offset;
};
Grid rope_grid(const RopeParams& p);
Dispatch rope(gpu::Device& device, BufferBinding q, BufferBinding k, const RopeParams& p);

// attention.wgsl: causal softmax(Q K^T / sqrt(d)) V with GQA; query t sits at position_offset + t
struct AttentionParams {
  uint32_t T, S, num_q_heads, num_kv_heads, head_dim, position_offset;
};
Grid attention_grid(const AttentionParams& p);
Dispatch attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V, BufferBinding output,
                   const AttentionParams& p);

// softmax.wgsl: row-wise softmax
struct SoftmaxParams {
  uint32_t num_rows, row_size;
};
Grid softmax_grid(const SoftmaxParams& p);
Dispatch softmax(gpu::Device& device, BufferBinding input, BufferBinding output, const SoftmaxParams& p);

// silu.wgsl, gelu.wgsl (tanh approximation): element-wise over `count`
struct ElementwiseParams {
  uint32_t count;
};
Grid elementwise_grid(const ElementwiseParams& p);
Dispatch silu(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p);
Dispatch gelu(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p);
// add.wgsl, mul.wgsl: output = a (+|*) b element-wise
Dispatch add(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output, const ElementwiseParams& p);
Dispatch mul(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output, const ElementwiseParams& p);

static_assert(sizeof(EmbeddingParams) == 8 && sizeof(MatmulParams) == 12 && sizeof(MatmulInt4Params) == 16);
static_assert(sizeof(RmsNormParams) == 16 && sizeof(LayerNormParams) == 16 && sizeof(RopeParams) == 24);
static_assert(sizeof(AttentionParams) == 24 && sizeof(SoftmaxParams) == 8 && sizeof(ElementwiseParams) == 4);

}  // namespace gerbil::kernels
