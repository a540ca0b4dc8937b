#include "kernels/seed.h"

#include <algorithm>

#include "gerbil/error.h"

namespace gerbil::kernels {

Grid embedding_grid(const EmbeddingParams& p) {
  return fold(ceil_div(count_of(p.seq_len, p.hidden_size), kWorkgroupSize));
}

Dispatch embedding(gpu::Device& device, BufferBinding input_ids, BufferBinding weight, BufferBinding output,
                   const EmbeddingParams& p, uint32_t vocab_size) {
  auto shapes = fmt::format("T={} D={} vocab={}", p.seq_len, p.hidden_size, vocab_size);
  return prepare(device, "embedding", shapes,
                 {{"input_ids", input_ids, p.seq_len},
                  {"weight", weight, count_of(vocab_size, p.hidden_size)},
                  {"output", output, count_of(p.seq_len, p.hidden_size)}},
                 p, embedding_grid(p));
}

Grid matmul_grid(const MatmulParams& p) {
  return {static_cast<uint32_t>(ceil_div(p.N, 16)), static_cast<uint32_t>(ceil_div(p.M, 16)), 1};
}

Dispatch matmul(gpu::Device& device, BufferBinding A, BufferBinding B, BufferBinding C, const MatmulParams& p) {
  auto shapes = fmt::format("M={} K={} N={}", p.M, p.K, p.N);
  return prepare(device, "matmul", shapes,
                 {{"A", A, count_of(p.M, p.K)}, {"B", B, count_of(p.K, p.N)}, {"C", C, count_of(p.M, p.N)}}, p,
                 matmul_grid(p));
}

Grid matmul_int4_grid(const MatmulInt4Params& p) { return matmul_grid({p.M, p.K, p.N}); }

Dispatch matmul_int4(gpu::Device& device, BufferBinding A, BufferBinding B_q, BufferBinding scales,
                     BufferBinding zeros, BufferBinding C, const MatmulInt4Params& p) {
  auto shapes = fmt::format("M={} K={} N={} group_size={}", p.M, p.K, p.N, p.group_size);
  if (p.group_size == 0) fail("kernel 'matmul_int4' ({}): group_size must be positive", shapes);
  uint64_t weights = count_of(p.K, p.N);
  uint64_t groups = ceil_div(weights, p.group_size);
  return prepare(device, "matmul_int4", shapes,
                 {{"A", A, count_of(p.M, p.K)},
                  {"B_q", B_q, ceil_div(weights, 8)},
                  {"scales", scales, groups},
                  {"zeros", zeros, groups},
                  {"C", C, count_of(p.M, p.N)}},
                 p, matmul_int4_grid(p));
}

Grid rmsnorm_grid(const RmsNormParams& p) { return fold(p.seq_len); }

Dispatch rmsnorm(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding output,
                 const RmsNormParams& p) {
  auto shapes = fmt::format("T={} D={}", p.seq_len, p.hidden_size);
  uint64_t n = count_of(p.seq_len, p.hidden_size);
  return prepare(device, "rmsnorm", shapes, {{"input", input, n}, {"weight", weight, p.hidden_size}, {"output", output, n}},
                 p, rmsnorm_grid(p));
}

Grid layernorm_grid(const LayerNormParams& p) { return fold(p.seq_len); }

Dispatch layernorm(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding bias,
                   BufferBinding output, const LayerNormParams& p) {
  auto shapes = fmt::format("T={} D={}", p.seq_len, p.hidden_size);
  uint64_t n = count_of(p.seq_len, p.hidden_size);
  return prepare(device, "layernorm", shapes,
                 {{"input", input, n}, {"weight", weight, p.hidden_size}, {"bias", bias, p.hidden_size},
                  {"output", output, n}},
                 p, layernorm_grid(p));
}

Grid rope_grid(const RopeParams& p) {
  uint64_t pairs = count_of(p.seq_len, std::max(p.num_q_heads, p.num_kv_heads)) * (p.head_dim / 2);
  return fold(ceil_div(pairs, kWorkgroupSize));
}

Dispatch rope(gpu::Device& device, BufferBinding q, BufferBinding k, const RopeParams& p) {
  auto shapes = fmt::format("T={} q_heads={} kv_heads={} head_dim={} offset={}", p.seq_len, p.num_q_heads,
                            p.num_kv_heads, p.head_dim, p.position_offset);
  if (p.head_dim % 2 != 0) fail("kernel 'rope' ({}): head_dim must be even", shapes);
  return prepare(device, "rope", shapes,
                 {{"q", q, count_of(p.seq_len, p.num_q_heads) * p.head_dim},
                  {"k", k, count_of(p.seq_len, p.num_kv_heads) * p.head_dim}},
                 p, rope_grid(p));
}

Grid attention_grid(const AttentionParams& p) { return {p.T, p.num_q_heads, 1}; }

Dispatch attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V, BufferBinding output,
                   const AttentionParams& p) {
  auto shapes = fmt::format("T={} S={} q_heads={} kv_heads={} head_dim={} offset={}", p.T, p.S, p.num_q_heads,
                            p.num_kv_heads, p.head_dim, p.position_offset);
  if (p.num_kv_heads == 0 || p.num_q_heads % p.num_kv_heads != 0)
    fail("kernel 'attention' ({}): q_heads must be a multiple of kv_heads", shapes);
  if (p.position_offset + p.T > p.S)
    fail("kernel 'attention' ({}): queries reach position {} but only S={} keys exist", shapes,
         p.position_offset + p.T - 1, p.S);
  uint64_t q = count_of(p.T, p.num_q_heads) * p.head_dim;
  uint64_t kv = count_of(p.S, p.num_kv_heads) * p.head_dim;
  return prepare(device, "attention", shapes, {{"Q", Q, q}, {"K", K, kv}, {"V", V, kv}, {"output", output, q}}, p,
                 attention_grid(p));
}

Grid softmax_grid(const SoftmaxParams& p) { return fold(p.num_rows); }

Dispatch softmax(gpu::Device& device, BufferBinding input, BufferBinding output, const SoftmaxParams& p) {
  auto shapes = fmt::format("rows={} cols={}", p.num_rows, p.row_size);
  uint64_t n = count_of(p.num_rows, p.row_size);
  return prepare(device, "softmax", shapes, {{"input", input, n}, {"output", output, n}}, p, softmax_grid(p));
}

Grid elementwise_grid(const ElementwiseParams& p) { return fold(ceil_div(p.count, kWorkgroupSize)); }

namespace {

Dispatch unary(gpu::Device& device, std::string_view kernel, BufferBinding input, BufferBinding output,
               const ElementwiseParams& p) {
  return prepare(device, kernel, fmt::format("count={}", p.count), {{"input", input, p.count}, {"output", output, p.count}},
                 p, elementwise_grid(p));
}

Dispatch binary(gpu::Device& device, std::string_view kernel, BufferBinding a, BufferBinding b, BufferBinding output,
                const ElementwiseParams& p) {
  return prepare(device, kernel, fmt::format("count={}", p.count),
                 {{"a", a, p.count}, {"b", b, p.count}, {"output", output, p.count}}, p, elementwise_grid(p));
}

}  // namespace

Dispatch silu(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p) {
  return unary(device, "silu", input, output, p);
}
Dispatch gelu(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p) {
  return unary(device, "gelu", input, output, p);
}
Dispatch add(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output, const ElementwiseParams& p) {
  return binary(device, "add", a, b, output, p);
}
Dispatch mul(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output, const ElementwiseParams& p) {
  return binary(device, "mul", a, b, output, p);
}

}  // namespace gerbil::kernels
