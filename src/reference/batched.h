// Float64 references of the batched-step kernels (src/kernels/batched.h), built on the single-sequence ones in
// reference/model.h: each table entry is one row of one sequence, run through qkv_rope_store / flash_attention
// on its own slot of the pool. Conventions as in model.h.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reference/model.h"

namespace gerbil::reference {

// Entry i of a row table: activation row `row` belongs to the slot whose cache rows begin at element
// `cache_base` of the pool, at `position` of that slot.
struct TableRow {
  size_t row, cache_base, position;
};

// rope_store_rows: for each entry, qkv_rope_store of activation row `row` of qkv [*, (Hq + 2 Hkv) * head_dim]
// at its position, storing into its slot of the pools (each [*, Hkv * head_dim] from cache_base). Returns the
// q rows in table order ([entries, Hq * head_dim]) and the pools updated. s.T and s.position_offset are unused.
QkvRopeOutput rope_store_rows(std::span<const double> qkv, std::span<const double> q_norm,
                              std::span<const double> k_norm, std::span<const double> rope_table,
                              std::span<const TableRow> table, const QkvShape& s, double eps,
                              std::vector<double> k_pool, std::vector<double> v_pool);

// attention_rows: for each entry, flash_attention of the query at activation row `row` of Q [*, Hq * head_dim]
// over its slot's keys 0..position (of the pools, from cache_base). Returns [entries, Hq * head_dim] in table
// order.
std::vector<double> attention_rows(std::span<const double> Q, std::span<const double> k_pool,
                                   std::span<const double> v_pool, std::span<const TableRow> table,
                                   size_t num_q_heads, size_t num_kv_heads, size_t head_dim, size_t window,
                                   double scale);

}  // namespace gerbil::reference
