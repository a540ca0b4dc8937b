#include "kernels/batched.h"

#include <fmt/format.h>

#include "gerbil/error.h"

namespace gerbil::kernels {
namespace {

constexpr uint32_t kMaxHeadDim = 256;  // head_store.wgsl MAX_HEAD_DIM, attention_rows.wgsl MAX_PIECES * 4
constexpr uint32_t kRowsTile = 256;    // attention_rows.wgsl TILE: keys per tile

void check_heads(std::string_view kernel, const std::string& shapes, uint32_t entries, uint32_t q_heads,
                 uint32_t kv_heads, uint32_t head_dim, const RowSpace& space) {
  if (entries == 0) fail("kernel '{}' ({}): no rows in the table", kernel, shapes);
  if (kv_heads == 0 || q_heads == 0 || q_heads % kv_heads != 0)
    fail("kernel '{}' ({}): q_heads must be a positive multiple of kv_heads", kernel, shapes);
  if (head_dim == 0 || head_dim > kMaxHeadDim)
    fail("kernel '{}' ({}): head_dim must be in 1..{}", kernel, shapes, kMaxHeadDim);
  check_kv_type(kernel, shapes, space.kv, head_dim);
  if (space.kv_width != uint64_t(kv_heads) * head_dim)
    fail("kernel '{}' ({}): the pool's rows hold {} elements, not kv_heads * head_dim", kernel, shapes, space.kv_width);
}

std::string space_shapes(const RowSpace& space, const KvBlocks& blocks) {
  return fmt::format("rows={} blocks={}x{} tables={} kv={}", space.activation_rows, blocks.blocks, blocks.block_tokens,
                     space.table_entries, kv_type_name(space.kv));
}

Operand tables_operand(const KvBlocks& blocks, const RowSpace& space) {
  return {"kv_table", blocks.table, std::max(1u, space.table_entries)};
}

uint64_t table_words(uint32_t entries) { return uint64_t(entries) * sizeof(RowEntry) / 4; }

}  // namespace

void check_row_table(std::span<const RowEntry> table, const RowSpace& space, uint32_t block_tokens) {
  if (block_tokens == 0) fail("row table: KV blocks of 0 tokens");
  for (size_t i = 0; i < table.size(); ++i) {
    const RowEntry& e = table[i];
    if (e.row >= space.activation_rows)
      fail("row table entry {}: activation row {} is past the {} rows", i, e.row, space.activation_rows);
    if (uint64_t(e.table_base) + e.position / block_tokens >= space.table_entries)
      fail("row table entry {}: position {} of the block table at entry {} lies past the {} table entries", i,
           e.position, e.table_base, space.table_entries);
  }
}

Dispatch rope_store_rows(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                         BufferBinding rope_table, BufferBinding q_out, BufferBinding k_pool, BufferBinding v_pool,
                         BufferBinding table, const KvBlocks& blocks, const QkvRopeParams& p, const RowSpace& space) {
  auto shapes = fmt::format("entries={} heads={}/{} head_dim={} rotary_dim={} qk_norm={} {}", p.seq_len, p.num_q_heads,
                            p.num_kv_heads, p.head_dim, p.rotary_dim, p.use_qk_norm, space_shapes(space, blocks));
  check_heads("rope_store_rows", shapes, p.seq_len, p.num_q_heads, p.num_kv_heads, p.head_dim, space);
  if (p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    fail("kernel 'rope_store_rows' ({}): rotary_dim must be even and at most head_dim", shapes);
  uint64_t rows = space.activation_rows;
  uint64_t pool = kv_pool_elements("rope_store_rows", shapes, blocks, 1, space.kv_width);
  return prepare(device, "rope_store_rows", shapes,
                 {{"qkv", qkv, count_of(rows, p.num_q_heads + 2ull * p.num_kv_heads) * p.head_dim},
                  {"q_norm", q_norm, p.use_qk_norm ? p.head_dim : 1u},
                  {"k_norm", k_norm, p.use_qk_norm ? p.head_dim : 1u},
                  {"rope_table", rope_table, p.rotary_dim ? rope_table_length(p.rotary_dim) : 1},
                  {"q_out", q_out, count_of(rows, p.num_q_heads) * p.head_dim},
                  kv_pool_operand("k_pool", k_pool, pool, space.kv, p.head_dim),
                  kv_pool_operand("v_pool", v_pool, pool, space.kv, p.head_dim),
                  {"table", table, table_words(p.seq_len)},
                  tables_operand(blocks, space)},
                 p, fold(count_of(p.seq_len, p.num_q_heads + p.num_kv_heads)),
                 cache_constants(space.kv, pool, blocks));
}

// (A q8 row's words are single u32 of a vec4 word: head_dim a multiple of 4 is enough, as for f32.)
bool attention_rows_fits(uint32_t head_dim, KvType kv) {
  uint64_t word_bytes = kv == KvType::Q8 ? 4 : 16;
  return head_dim > 0 && head_dim <= kMaxHeadDim && (uint64_t(head_dim) * kv_bytes(kv)) % word_bytes == 0;
}

Dispatch attention_rows(gpu::Device& device, BufferBinding Q, BufferBinding k_pool, BufferBinding v_pool,
                        BufferBinding out, BufferBinding table, const KvBlocks& blocks, const FlashAttentionParams& p,
                        const RowSpace& space) {
  auto shapes = fmt::format("entries={} heads={}/{} head_dim={} window={} {}", p.T, p.num_q_heads, p.num_kv_heads,
                            p.head_dim, p.window, space_shapes(space, blocks));
  check_heads("attention_rows", shapes, p.T, p.num_q_heads, p.num_kv_heads, p.head_dim, space);
  if (!attention_rows_fits(p.head_dim, space.kv))
    fail("kernel 'attention_rows' ({}): a row of head_dim {} is not whole 16-byte words", shapes, p.head_dim);
  if (p.T > 65535) fail("kernel 'attention_rows' ({}): at most 65535 entries", shapes);
  uint64_t q = count_of(space.activation_rows, p.num_q_heads) * p.head_dim;
  uint64_t pool = kv_pool_elements("attention_rows", shapes, blocks, kRowsTile, space.kv_width);
  return prepare(device, "attention_rows", shapes,
                 {{"Q", Q, q},
                  kv_pool_operand("K", k_pool, pool, space.kv, p.head_dim),
                  kv_pool_operand("V", v_pool, pool, space.kv, p.head_dim),
                  {"out", out, q},
                  {"table", table, table_words(p.T)},
                  tables_operand(blocks, space)},
                 p, Grid{p.T, p.num_q_heads, 1},
                 cache_constants(space.kv, pool, blocks, {{"HEAD_DIM", double(p.head_dim)}}));
}

}  // namespace gerbil::kernels
