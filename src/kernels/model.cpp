#include "kernels/model.h"

#include <algorithm>

#include "gerbil/error.h"

namespace gerbil::kernels {
namespace {

uint64_t count_of(uint64_t a, uint64_t b) { return a * b; }

// The linear kernels' matrix-vector variant serves up to this many rows (linear.wgsl MATVEC_ROWS); larger M
// goes to the tiled variant with TILE x TILE output tiles.
constexpr uint32_t kMatvecRows = 4;
constexpr uint32_t kTile = 64;
constexpr uint32_t kLinearMatvecColumns = 8;  // linear.wgsl COLS
constexpr uint32_t kGptqMatvecColumns = 8;    // linear_gptq.wgsl COLS
constexpr uint32_t kMaxHeadDim = 256;         // qkv_rope_store.wgsl / flash_attention.wgsl MAX_HEAD_DIM

const char* name_of(WeightType type) {
  switch (type) {
    case WeightType::F32:
      return "f32";
    case WeightType::F16:
      return "f16";
    case WeightType::BF16:
      return "bf16";
  }
  return "invalid";
}

// Weights are counted in their own bytes, not in u32 words: an odd-length 16-bit tensor ends in half a word,
// which the shader reads whole, but buffers are allocated and bound in whole words, so that word exists.
Operand weight_operand(std::string_view name, BufferBinding binding, uint64_t elements, WeightType type) {
  return {name, binding, elements, weight_bytes(type)};
}

// An operand the kernel ignores (its flag is 0) only has to be some buffer.
uint64_t used(uint32_t flag, uint64_t elements) { return flag ? elements : 1; }

void check_weight_type(std::string_view kernel, const std::string& shapes, WeightType type) {
  if (type != WeightType::F32 && type != WeightType::F16 && type != WeightType::BF16)
    fail("kernel '{}' ({}): weight type {} is not f32 (0), f16 (1) or bf16 (2)", kernel, shapes,
         static_cast<uint32_t>(type));
}

bool use_matvec(uint32_t M) { return M <= kMatvecRows; }

Grid linear_like_grid(uint32_t M, uint32_t N, uint32_t matvec_columns) {
  if (use_matvec(M)) return fold(ceil_div(N, matvec_columns));
  return fold(ceil_div(N, kTile) * ceil_div(M, kTile));
}

// Shape rules shared by linear and linear_gptq.
void check_linear(std::string_view kernel, const std::string& shapes, uint32_t M, uint32_t K, uint32_t N,
                  uint32_t out_stride, uint32_t out_col) {
  if (M == 0 || K == 0 || N == 0) fail("kernel '{}' ({}): M, K and N must be positive", kernel, shapes);
  if (uint64_t(out_col) + N > out_stride)
    fail("kernel '{}' ({}): output columns [{}, {}) do not fit in out_stride {}", kernel, shapes, out_col,
         uint64_t(out_col) + N, out_stride);
}

}  // namespace

uint32_t weight_bytes(WeightType type) {
  switch (type) {
    case WeightType::F32:
      return 4;
    case WeightType::F16:
    case WeightType::BF16:
      return 2;
  }
  fail("weight type {} is not one of f32 (0), f16 (1), bf16 (2)", static_cast<uint32_t>(type));
}

Dispatch embed(gpu::Device& device, BufferBinding ids, BufferBinding table, BufferBinding positions,
               BufferBinding out, const EmbedParams& p, WeightType type, uint32_t position_rows) {
  auto shapes = fmt::format(
      "T={} D={} vocab_block=[{}, {}) type={} positions={}", p.seq_len, p.hidden_size, p.vocab_offset,
      uint64_t(p.vocab_offset) + p.vocab_rows, name_of(type),
      p.use_positions ? fmt::format("{} rows from {}", position_rows, p.position_offset) : "none");
  check_weight_type("embed", shapes, type);
  if (p.seq_len == 0 || p.hidden_size == 0 || p.vocab_rows == 0)
    fail("kernel 'embed' ({}): seq_len, hidden_size and vocab_rows must be positive", shapes);
  if (p.use_positions && uint64_t(p.position_offset) + p.seq_len > position_rows)
    fail("kernel 'embed' ({}): positions {}..{} lie past the {} rows of the position table", shapes,
         p.position_offset, uint64_t(p.position_offset) + p.seq_len - 1, position_rows);
  uint64_t n = count_of(p.seq_len, p.hidden_size);
  return prepare(device, "embed", shapes,
                 {{"ids", ids, p.seq_len},
                  weight_operand("table", table, count_of(p.vocab_rows, p.hidden_size), type),
                  {"positions", positions, used(p.use_positions, count_of(position_rows, p.hidden_size))},
                  {"out", out, n}},
                 p, fold(ceil_div(n, kWorkgroupSize)), {{"WEIGHT_TYPE", double(type)}});
}

Grid linear_grid(const LinearParams& p) { return linear_like_grid(p.M, p.N, kLinearMatvecColumns); }

namespace {

// linear_matvec_sg.wgsl serves decoding when the adapter has subgroups of a known size and weight rows are
// whole 16-byte pieces; it covers 256 / subgroup_size columns per workgroup.
bool use_subgroup_matvec(const gpu::Device& device, const LinearParams& p, WeightType type) {
  return linear_fuses_input(device, p.M, p.K, type);
}

Grid subgroup_matvec_grid(const gpu::Device& device, const LinearParams& p) {
  uint32_t columns = std::max<uint32_t>(1, kWorkgroupSize / device.adapter().subgroup_max_size);
  return fold(ceil_div(p.N, columns));
}

}  // namespace

bool linear_fuses_input(const gpu::Device& device, uint32_t M, uint32_t K, WeightType type) {
  return device.features().subgroups && device.adapter().subgroup_max_size > 0 && use_matvec(M) &&
         (uint64_t(K) * weight_bytes(type)) % 16 == 0;
}

Dispatch linear(gpu::Device& device, BufferBinding x, BufferBinding weight, BufferBinding bias,
                BufferBinding residual, BufferBinding out, const LinearParams& p, WeightType type,
                BufferBinding norm_weight) {
  auto shapes = fmt::format("M={} K={} N={} type={} out_stride={} out_col={}", p.M, p.K, p.N, name_of(type),
                            p.out_stride, p.out_col);
  check_weight_type("linear", shapes, type);
  check_linear("linear", shapes, p.M, p.K, p.N, p.out_stride, p.out_col);
  if (p.x_gate > 2) fail("kernel 'linear' ({}): x_gate must be 0, 1 (SiLU) or 2 (GELU)", shapes);
  bool fused = p.x_gate != 0 || p.norm_x != 0;
  if (fused && !use_subgroup_matvec(device, p, type))
    fail("kernel 'linear' ({}): fused gate / norm inputs need the subgroup decode variant (see linear_fuses_input)",
         shapes);
  uint64_t out_count = count_of(p.M, p.out_stride);
  uint64_t x_count = count_of(p.M, p.K) * (p.x_gate ? 2 : 1);
  if (use_subgroup_matvec(device, p, type)) {
    BufferBinding norm = norm_weight.buffer ? norm_weight : x;
    return prepare(device, "linear_matvec_sg", shapes,
                   {{"x", x, x_count},
                    weight_operand("W", weight, count_of(p.N, p.K), type),
                    {"bias", bias, used(p.has_bias, p.N)},
                    {"residual", residual, used(p.has_residual, out_count)},
                    {"out", out, out_count},
                    {"norm_weight", norm, used(p.norm_x, p.K)}},
                   p, subgroup_matvec_grid(device, p), {{"WEIGHT_TYPE", double(type)}});
  }
  std::initializer_list<Operand> operands = {{"x", x, x_count},
                                             weight_operand("W", weight, count_of(p.N, p.K), type),
                                             {"bias", bias, used(p.has_bias, p.N)},
                                             {"residual", residual, used(p.has_residual, out_count)},
                                             {"out", out, out_count}};
  return prepare(device, "linear", shapes, operands, p, linear_grid(p),
                 {{"WEIGHT_TYPE", double(type)}, {"MATVEC", use_matvec(p.M) ? 1.0 : 0.0}});
}

Dispatch linear_gptq(gpu::Device& device, BufferBinding x, BufferBinding qweight, BufferBinding qzeros,
                     BufferBinding scales, BufferBinding bias, BufferBinding residual, BufferBinding out,
                     const LinearGptqParams& p) {
  auto shapes = fmt::format("M={} K={} N={} group_size={} out_stride={} out_col={}", p.M, p.K, p.N,
                            p.group_size, p.out_stride, p.out_col);
  check_linear("linear_gptq", shapes, p.M, p.K, p.N, p.out_stride, p.out_col);
  // A qweight word holds 8 consecutive k, which must share one group.
  if (p.group_size == 0 || p.group_size % 8 != 0)
    fail("kernel 'linear_gptq' ({}): group_size must be a positive multiple of 8", shapes);
  if (p.K % p.group_size != 0) fail("kernel 'linear_gptq' ({}): K must be a multiple of group_size", shapes);
  if (p.N % 8 != 0)
    fail("kernel 'linear_gptq' ({}): N must be a multiple of 8 (qzeros packs 8 columns)", shapes);
  uint64_t groups = p.K / p.group_size;
  uint64_t out_count = count_of(p.M, p.out_stride);
  return prepare(device, "linear_gptq", shapes,
                 {{"x", x, count_of(p.M, p.K)},
                  {"qweight", qweight, count_of(p.K / 8, p.N)},
                  {"qzeros", qzeros, count_of(groups, p.N / 8)},
                  weight_operand("scales", scales, count_of(groups, p.N), WeightType::F16),
                  {"bias", bias, used(p.has_bias, p.N)},
                  {"residual", residual, used(p.has_residual, out_count)},
                  {"out", out, out_count}},
                 p, linear_like_grid(p.M, p.N, kGptqMatvecColumns),
                 {{"MATVEC", use_matvec(p.M) ? 1.0 : 0.0}});
}

Dispatch gated_act(gpu::Device& device, BufferBinding gate_up, BufferBinding out, const GatedActParams& p) {
  auto shapes = fmt::format("T={} I={} activation={}", p.seq_len, p.intermediate, p.activation);
  if (p.activation > 1) fail("kernel 'gated_act' ({}): activation must be 0 (SiLU) or 1 (GELU-tanh)", shapes);
  uint64_t n = count_of(p.seq_len, p.intermediate);
  return prepare(device, "gated_act", shapes, {{"gate_up", gate_up, 2 * n}, {"out", out, n}}, p,
                 fold(ceil_div(n, kWorkgroupSize)));
}

Dispatch qkv_rope_store(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                        BufferBinding inv_freq, BufferBinding q_out, BufferBinding k_cache,
                        BufferBinding v_cache, const QkvRopeParams& p, uint32_t cache_capacity) {
  auto shapes = fmt::format("T={} heads={}/{} head_dim={} rotary_dim={} offset={} qk_norm={} capacity={}",
                            p.seq_len, p.num_q_heads, p.num_kv_heads, p.head_dim, p.rotary_dim,
                            p.position_offset, p.use_qk_norm, cache_capacity);
  if (p.num_q_heads == 0 || p.num_kv_heads == 0)
    fail("kernel 'qkv_rope_store' ({}): head counts must be positive", shapes);
  if (p.head_dim == 0 || p.head_dim > kMaxHeadDim)
    fail("kernel 'qkv_rope_store' ({}): head_dim must be in 1..{}", shapes, kMaxHeadDim);
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    fail("kernel 'qkv_rope_store' ({}): rotary_dim must be even and at most head_dim", shapes);
  if (uint64_t(p.position_offset) + p.seq_len > cache_capacity)
    fail("kernel 'qkv_rope_store' ({}): positions {}..{} lie past the cache capacity of {}", shapes,
         p.position_offset, uint64_t(p.position_offset) + p.seq_len - 1, cache_capacity);
  uint64_t cache = count_of(cache_capacity, p.num_kv_heads) * p.head_dim;
  return prepare(device, "qkv_rope_store", shapes,
                 {{"qkv", qkv, count_of(p.seq_len, p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim},
                  {"q_norm", q_norm, used(p.use_qk_norm, p.head_dim)},
                  {"k_norm", k_norm, used(p.use_qk_norm, p.head_dim)},
                  {"inv_freq", inv_freq, std::max(1u, p.rotary_dim / 2)},
                  {"q_out", q_out, count_of(p.seq_len, p.num_q_heads) * p.head_dim},
                  {"k_cache", k_cache, cache},
                  {"v_cache", v_cache, cache}},
                 p, fold(count_of(p.seq_len, p.num_q_heads + p.num_kv_heads)));
}

namespace {

constexpr uint32_t kSplitGranule = 128;  // flash_attention.wgsl CHUNK_GRANULE: split chunks are multiples of it
constexpr uint32_t kMaxSplits = 64;      // bounds the scratch buffer and the combine's loop

std::string flash_shapes(const FlashAttentionParams& p) {
  return fmt::format("T={} S={} heads={}/{} head_dim={} offset={} window={}", p.T, p.S, p.num_q_heads,
                     p.num_kv_heads, p.head_dim, p.position_offset, p.window);
}

void check_flash(const std::string& shapes, const FlashAttentionParams& p) {
  if (p.num_kv_heads == 0 || p.num_q_heads % p.num_kv_heads != 0)
    fail("kernel 'flash_attention' ({}): q_heads must be a positive multiple of kv_heads", shapes);
  if (p.head_dim == 0 || p.head_dim > kMaxHeadDim)
    fail("kernel 'flash_attention' ({}): head_dim must be in 1..{}", shapes, kMaxHeadDim);
  if (p.T == 0) fail("kernel 'flash_attention' ({}): T must be positive", shapes);
  if (uint64_t(p.position_offset) + p.T > p.S)
    fail("kernel 'flash_attention' ({}): queries reach position {} but only S={} keys exist", shapes,
         uint64_t(p.position_offset) + p.T - 1, p.S);
}

// flash_attention_block.wgsl's queries per block and keys per tile: the largest blocks whose workgroup
// memory (flash_block_bytes) fits 32 KiB at each head_dim, with at most 16 outputs per thread.
struct FlashBlock {
  uint32_t queries, keys;
};

FlashBlock flash_block_shape(uint32_t head_dim) {
  if (head_dim <= 64) return {32, 32};
  if (head_dim <= 128) return {16, 32};
  return {16, 8};
}

uint64_t flash_block_bytes(FlashBlock b, uint32_t head_dim) {
  return 4 * (uint64_t(b.queries + b.keys) * (head_dim + 1) + b.queries * b.keys + 3 * b.queries);
}

bool use_flash_block(const gpu::Device& device, const FlashAttentionParams& p) {
  return p.T >= kFlashBlockMinQueries &&
         flash_block_bytes(flash_block_shape(p.head_dim), p.head_dim) <=
             device.limits().maxComputeWorkgroupStorageSize;
}

uint64_t flash_partials(const FlashAttentionParams& p, uint32_t splits) {
  return count_of(p.T, p.num_q_heads) * splits * (p.head_dim + 2);
}

}  // namespace

Dispatch flash_attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V,
                         BufferBinding out, const FlashAttentionParams& p) {
  auto shapes = flash_shapes(p);
  check_flash(shapes, p);
  uint64_t q = count_of(p.T, p.num_q_heads) * p.head_dim;
  uint64_t kv = count_of(p.S, p.num_kv_heads) * p.head_dim;
  std::initializer_list<Operand> operands = {{"Q", Q, q}, {"K", K, kv}, {"V", V, kv}, {"out", out, q}};
  if (use_flash_block(device, p)) {
    FlashBlock block = flash_block_shape(p.head_dim);
    Grid blocks = fold(ceil_div(p.T, block.queries));
    return prepare(device, "flash_attention_block", shapes, operands, p, Grid{blocks.x, p.num_q_heads, blocks.y},
                   {{"BLOCK_Q", double(block.queries)}, {"KEY_TILE", double(block.keys)},
                    {"HEAD_DIM", double(p.head_dim)}});
  }
  Grid queries = fold(p.T);
  return prepare(device, "flash_attention", shapes, operands, p, Grid{queries.x, p.num_q_heads, queries.y});
}

uint32_t flash_attention_splits(uint32_t capacity) {
  return uint32_t(std::clamp<uint64_t>(ceil_div(capacity, kSplitGranule), 1, kMaxSplits));
}

uint64_t flash_attention_scratch_bytes(const FlashAttentionParams& p, uint32_t capacity) {
  return 4 * std::max<uint64_t>(1, flash_partials(p, flash_attention_splits(capacity)));
}

std::vector<Dispatch> flash_attention(gpu::Device& device, BufferBinding Q, BufferBinding K, BufferBinding V,
                                      BufferBinding out, const FlashAttentionParams& p, BufferBinding scratch,
                                      uint32_t capacity) {
  std::vector<Dispatch> dispatches;
  uint32_t splits = flash_attention_splits(capacity);
  if (p.T > kFlashSplitMaxQueries || splits < 2) {
    dispatches.push_back(flash_attention(device, Q, K, V, out, p));
    return dispatches;
  }
  auto shapes = fmt::format("{} capacity={} splits={}", flash_shapes(p), capacity, splits);
  check_flash(shapes, p);
  if (p.S > capacity)
    fail("kernel 'flash_attention' ({}): S={} keys exceed the capacity of {}", shapes, p.S, capacity);
  uint64_t q = count_of(p.T, p.num_q_heads) * p.head_dim;
  uint64_t kv = count_of(capacity, p.num_kv_heads) * p.head_dim;  // later runs may see up to capacity keys
  uint64_t partials = flash_partials(p, splits);
  gpu::Constants constants = {{"SPLITS", double(splits)}};
  dispatches.push_back(prepare(device, "flash_attention", shapes,
                               {{"Q", Q, q}, {"K", K, kv}, {"V", V, kv}, {"partials", scratch, partials}}, p,
                               Grid{p.T, p.num_q_heads, splits}, constants));
  dispatches.push_back(prepare(device, "flash_attention_combine", shapes,
                               {{"partials", scratch, partials}, {"out", out, q}}, p, Grid{p.T, p.num_q_heads, 1},
                               constants));
  return dispatches;
}

Dispatch argmax(gpu::Device& device, BufferBinding logits, BufferBinding next_ids, BufferBinding history,
                const ArgmaxParams& p) {
  auto shapes = fmt::format("count={} slot={}", p.count, p.slot);
  if (p.count == 0) fail("kernel 'argmax' ({}): no logits", shapes);
  return prepare(device, "argmax", shapes,
                 {{"logits", logits, p.count}, {"next_ids", next_ids, 1}, {"history", history, uint64_t(p.slot) + 1}}, p,
                 {1, 1, 1});
}

}  // namespace gerbil::kernels
