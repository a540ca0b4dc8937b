#include "kernels/batched.h"

#include <fmt/format.h>

#include "gerbil/error.h"

namespace gerbil::kernels {
namespace {

constexpr uint32_t kMaxHeadDim = 256;  // head_store.wgsl MAX_HEAD_DIM, attention_rows.wgsl MAX_PIECES * 4

void check_heads(std::string_view kernel, const std::string& shapes, uint32_t entries, uint32_t q_heads,
                 uint32_t kv_heads, uint32_t head_dim, const RowSpace& space) {
  if (entries == 0) fail("kernel '{}' ({}): no rows in the table", kernel, shapes);
  if (kv_heads == 0 || q_heads == 0 || q_heads % kv_heads != 0)
    fail("kernel '{}' ({}): q_heads must be a positive multiple of kv_heads", kernel, shapes);
  if (head_dim == 0 || head_dim > kMaxHeadDim)
    fail("kernel '{}' ({}): head_dim must be in 1..{}", kernel, shapes, kMaxHeadDim);
  if (space.kv != KvType::F32 && space.kv != KvType::F16)
    fail("kernel '{}' ({}): KV-cache type {} is not f32 (0) or f16 (1)", kernel, shapes, uint32_t(space.kv));
  if (space.kv == KvType::F16 && head_dim % 2 != 0)
    fail("kernel '{}' ({}): an f16 KV cache stores dims in pairs, so head_dim must be even", kernel, shapes);
  if (space.kv_width != uint64_t(kv_heads) * head_dim)
    fail("kernel '{}' ({}): the pool's rows hold {} elements, not kv_heads * head_dim", kernel, shapes, space.kv_width);
}

std::string space_shapes(const RowSpace& space) {
  return fmt::format("rows={} pool={} kv={}", space.activation_rows, space.pool_elements, kv_type_name(space.kv));
}

uint64_t table_words(uint32_t entries) { return uint64_t(entries) * sizeof(RowEntry) / 4; }

}  // namespace

void check_row_table(std::span<const RowEntry> table, const RowSpace& space) {
  uint32_t word = 16 / kv_bytes(space.kv);  // elements per 16-byte word
  for (size_t i = 0; i < table.size(); ++i) {
    const RowEntry& e = table[i];
    if (e.row >= space.activation_rows)
      fail("row table entry {}: activation row {} is past the {} rows", i, e.row, space.activation_rows);
    if (e.cache_base % word != 0)
      fail("row table entry {}: cache_base {} is not a multiple of {} elements", i, e.cache_base, word);
    if (e.cache_base + (uint64_t(e.position) + 1) * space.kv_width > space.pool_elements)
      fail("row table entry {}: position {} of the slot at element {} lies past the pool of {} elements", i,
           e.position, e.cache_base, space.pool_elements);
  }
}

Dispatch rope_store_rows(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                         BufferBinding inv_freq, BufferBinding q_out, BufferBinding k_pool, BufferBinding v_pool,
                         BufferBinding table, const QkvRopeParams& p, const RowSpace& space) {
  auto shapes = fmt::format("entries={} heads={}/{} head_dim={} rotary_dim={} qk_norm={} {}", p.seq_len, p.num_q_heads,
                            p.num_kv_heads, p.head_dim, p.rotary_dim, p.use_qk_norm, space_shapes(space));
  check_heads("rope_store_rows", shapes, p.seq_len, p.num_q_heads, p.num_kv_heads, p.head_dim, space);
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    fail("kernel 'rope_store_rows' ({}): rotary_dim must be even and at most head_dim", shapes);
  uint64_t rows = space.activation_rows;
  return prepare(device, "rope_store_rows", shapes,
                 {{"qkv", qkv, count_of(rows, p.num_q_heads + 2ull * p.num_kv_heads) * p.head_dim},
                  {"q_norm", q_norm, p.use_qk_norm ? p.head_dim : 1u},
                  {"k_norm", k_norm, p.use_qk_norm ? p.head_dim : 1u},
                  {"inv_freq", inv_freq, std::max(1u, p.rotary_dim / 2)},
                  {"q_out", q_out, count_of(rows, p.num_q_heads) * p.head_dim},
                  {"k_pool", k_pool, space.pool_elements, kv_bytes(space.kv)},
                  {"v_pool", v_pool, space.pool_elements, kv_bytes(space.kv)},
                  {"table", table, table_words(p.seq_len)}},
                 p, fold(count_of(p.seq_len, p.num_q_heads + p.num_kv_heads)),
                 {{"KV_TYPE", double(space.kv)}});
}

bool attention_rows_fits(uint32_t head_dim, KvType kv) {
  return head_dim > 0 && head_dim <= kMaxHeadDim && (uint64_t(head_dim) * kv_bytes(kv)) % 16 == 0;
}

Dispatch attention_rows(gpu::Device& device, BufferBinding Q, BufferBinding k_pool, BufferBinding v_pool,
                        BufferBinding out, BufferBinding table, const FlashAttentionParams& p, const RowSpace& space) {
  auto shapes = fmt::format("entries={} heads={}/{} head_dim={} window={} {}", p.T, p.num_q_heads, p.num_kv_heads,
                            p.head_dim, p.window, space_shapes(space));
  check_heads("attention_rows", shapes, p.T, p.num_q_heads, p.num_kv_heads, p.head_dim, space);
  if (!attention_rows_fits(p.head_dim, space.kv))
    fail("kernel 'attention_rows' ({}): a row of head_dim {} is not whole 16-byte words", shapes, p.head_dim);
  if (p.T > 65535) fail("kernel 'attention_rows' ({}): at most 65535 entries", shapes);
  uint64_t q = count_of(space.activation_rows, p.num_q_heads) * p.head_dim;
  return prepare(device, "attention_rows", shapes,
                 {{"Q", Q, q},
                  {"K", k_pool, space.pool_elements, kv_bytes(space.kv)},
                  {"V", v_pool, space.pool_elements, kv_bytes(space.kv)},
                  {"out", out, q},
                  {"table", table, table_words(p.T)}},
                 p, Grid{p.T, p.num_q_heads, 1}, {{"KV_TYPE", double(space.kv)}, {"HEAD_DIM", double(p.head_dim)}});
}

}  // namespace gerbil::kernels
