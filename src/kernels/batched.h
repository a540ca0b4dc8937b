// Kernels of a batched step's attention (continuous batching): the rows of several sequences, each with its own
// block table into the layer's KV-cache pools (kernels::KvBlocks) and its own position, rotated and stored by one
// dispatch and attended by another. Where each sequence's rows sit is not in the kernels' uniforms but in a row table (a storage buffer
// of RowEntry) that the step writes once, so the dispatches and their uniforms are built once per batch shape
// and every step rewrites only the table. Float64 references: src/reference/batched.h.
#pragma once

#include <span>

#include "kernels/model.h"

namespace gerbil::kernels {

// One row of the table (row_table.wgsl): activation row `row` (of q|k|v, q and the attention output) belongs to
// the sequence whose block table begins at entry `table_base` of the bound block tables, at `position` of it.
struct RowEntry {
  uint32_t row = 0, table_base = 0, position = 0, _pad = 0;
};
static_assert(sizeof(RowEntry) == 16);

// What the row kernels' bindings hold: `activation_rows` rows of the activations, `table_entries` block-table
// entries (every sequence's), pools of elements of type `kv` whose rows hold `kv_width` elements.
struct RowSpace {
  uint32_t activation_rows = 0;
  uint32_t table_entries = 0;
  uint64_t kv_width = 0;
  KvType kv = KvType::F32;
};

// Throws, naming the entry, where one's row lies past the activations or the block-table entry of its position
// past the bound tables (blocks of `block_tokens`). The kernels cannot check the table (it changes after they are
// built): whoever writes one checks it here; the block ids in the tables are the writer's to keep in the pool.
void check_row_table(std::span<const RowEntry> table, const RowSpace& space, uint32_t block_tokens);

// rope_store_rows.wgsl: qkv_rope_store's work (kernels/model.h) for the p.seq_len entries of `table`, each at its
// own position and block table (p.position_offset unused). qkv [rows, (Hq + 2 Hkv) * head_dim], q_out [rows, Hq *
// head_dim], the pools and every sequence's block tables as `blocks` says.
Dispatch rope_store_rows(gpu::Device& device, BufferBinding qkv, BufferBinding q_norm, BufferBinding k_norm,
                         BufferBinding rope_table, BufferBinding q_out, BufferBinding k_pool, BufferBinding v_pool,
                         BufferBinding table, const KvBlocks& blocks, const QkvRopeParams& p, const RowSpace& space);

// Whether attention_rows takes this head_dim with this cache: whole 16-byte words per row (head_dim a multiple
// of 4, of 8 for f16; q8: whole u32 words, head_dim a multiple of 4), at most 256.
bool attention_rows_fits(uint32_t head_dim, KvType kv);

// attention_rows.wgsl: flash attention's causal GQA attention (kernels/model.h) of one query per entry of
// `table` (p.T of them) over its own sequence's keys up to its position (through its block table), with p's heads,
// window and scale (p.S and p.position_offset unused). Q and out [rows, Hq * head_dim]. Blocks hold whole tiles
// of 256 keys.
Dispatch attention_rows(gpu::Device& device, BufferBinding Q, BufferBinding k_pool, BufferBinding v_pool,
                        BufferBinding out, BufferBinding table, const KvBlocks& blocks, const FlashAttentionParams& p,
                        const RowSpace& space);

}  // namespace gerbil::kernels
