// Kernels of a batched step's attention (continuous batching): the rows of several sequences, each in its own
// slot of the layer's KV-cache pool at its own position, rotated and stored by one dispatch and attended by
// another. Where each sequence's rows sit is not in the kernels' uniforms but in a row table (a storage buffer
// of RowEntry) that the step writes once, so the dispatches and their uniforms are built once per batch shape
// and every step rewrites only the table. Float64 references: src/reference/batched.h.
#pragma once

#include <span>

#include "kernels/model.h"

namespace gerbil::kernels {

// One row of the table (row_table.wgsl): activation row `row` (of q|k|v, q and the attention output) belongs to
// the sequence whose slot begins at element `cache_base` of the layer's pool, at `position` of that slot.
struct RowEntry {
  uint32_t row = 0, cache_base = 0, position = 0, _pad = 0;
};
static_assert(sizeof(RowEntry) == 16);

// What the row kernels' bindings hold: `activation_rows` rows of the activations, a pool of `pool_elements`
// elements of type `kv` whose rows hold `kv_width` elements.
struct RowSpace {
  uint32_t activation_rows = 0;
  uint64_t pool_elements = 0;
  uint64_t kv_width = 0;
  KvType kv = KvType::F32;
};

// Throws, naming the entry, where one's row lies past the activations, its slot's rows up to its position past
// the pool, or its cache_base is not a whole number of 16-byte words of the pool (attention_rows reads those).
// The kernels cannot check the table (it changes after they are built): whoever writes one checks it here.
void check_row_table(std::span<const RowEntry> table, const RowSpace& space);

// rope_store_rows.wgsl: qkv_rope_store's work (kernels/model.h) for the p.seq_len entries of `table`, each at its
// own position and slot (p.position_offset unused). qkv [rows, (Hq + 2 Hkv) * head_dim], q_out [rows, Hq *
// head_dim], pools of space.pool_elements.
Dispatch rope_store_rows(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                         BufferBinding inv_freq, BufferBinding q_out, BufferBinding k_pool, BufferBinding v_pool,
                         BufferBinding table, const QkvRopeParams& p, const RowSpace& space);

// Whether attention_rows takes this head_dim with this cache: whole 16-byte words per row (head_dim a multiple
// of 4, of 8 for f16), at most 256.
bool attention_rows_fits(uint32_t head_dim, KvType kv);

// attention_rows.wgsl: flash attention's causal GQA attention (kernels/model.h) of one query per entry of
// `table` (p.T of them) over its own slot's keys up to its position, with p's heads, window and scale (p.S and
// p.position_offset unused). Q and out [rows, Hq * head_dim].
Dispatch attention_rows(gpu::Device& device, BufferBinding Q, BufferBinding k_pool, BufferBinding v_pool,
                        BufferBinding out, BufferBinding table, const FlashAttentionParams& p, const RowSpace& space);

}  // namespace gerbil::kernels
