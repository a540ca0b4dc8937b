#include "reference/batched.h"

#include <algorithm>

#include "gerbil/error.h"

namespace gerbil::reference {
namespace {

// Elements [first, first + count) of `values`, which must hold them (`what` names the operand).
std::span<const double> part(std::span<const double> values, size_t first, size_t count, const char* what) {
  if (first + count > values.size())
    fail("reference::{}: elements {}..{} lie past its {}", what, first, first + count - 1, values.size());
  return values.subspan(first, count);
}

}  // namespace

QkvRopeOutput rope_store_rows(std::span<const double> qkv, std::span<const double> q_norm,
                              std::span<const double> k_norm, std::span<const double> rope_table,
                              std::span<const TableRow> table, const QkvShape& s, double eps,
                              std::vector<double> k_pool, std::vector<double> v_pool) {
  size_t width = (s.num_q_heads + 2 * s.num_kv_heads) * s.head_dim, kv_width = s.num_kv_heads * s.head_dim;
  QkvRopeOutput out{{}, std::move(k_pool), std::move(v_pool)};
  for (const TableRow& e : table) {
    size_t slot_elements = (e.position + 1) * kv_width;
    auto k = part(out.k_cache, e.cache_base, slot_elements, "rope_store_rows k_pool");
    auto v = part(out.v_cache, e.cache_base, slot_elements, "rope_store_rows v_pool");
    QkvShape one = s;
    one.T = 1;
    one.position_offset = e.position;
    auto stored = qkv_rope_store(part(qkv, e.row * width, width, "rope_store_rows qkv"), q_norm, k_norm, rope_table,
                                 one, eps, {k.begin(), k.end()}, {v.begin(), v.end()});
    out.q.insert(out.q.end(), stored.q.begin(), stored.q.end());
    std::copy(stored.k_cache.begin(), stored.k_cache.end(), out.k_cache.begin() + std::ptrdiff_t(e.cache_base));
    std::copy(stored.v_cache.begin(), stored.v_cache.end(), out.v_cache.begin() + std::ptrdiff_t(e.cache_base));
  }
  return out;
}

std::vector<double> attention_rows(std::span<const double> Q, std::span<const double> k_pool,
                                   std::span<const double> v_pool, std::span<const TableRow> table,
                                   size_t num_q_heads, size_t num_kv_heads, size_t head_dim, size_t window,
                                   double scale) {
  size_t q_width = num_q_heads * head_dim, kv_width = num_kv_heads * head_dim;
  std::vector<double> out;
  for (const TableRow& e : table) {
    size_t keys = e.position + 1;
    auto row = flash_attention(part(Q, e.row * q_width, q_width, "attention_rows Q"),
                               part(k_pool, e.cache_base, keys * kv_width, "attention_rows k_pool"),
                               part(v_pool, e.cache_base, keys * kv_width, "attention_rows v_pool"), 1, keys,
                               num_q_heads, num_kv_heads, head_dim, e.position, window, scale);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

}  // namespace gerbil::reference
