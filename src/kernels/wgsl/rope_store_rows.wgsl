// qkv_rope_store.wgsl for the rows of several sequences in one dispatch: table entry i (row_table.wgsl) takes
// activation row `row` of qkv (and of q_out) at its own `position`, and stores its k and v heads in the layer's
// cache pool at the row its sequence's block table (kv_table from entry `table_base`, kv_blocks.wgsl) gives. Each head is split, normed, rotated and stored as
// qkv_rope_store.wgsl does (head_store.wgsl).
// Bindings (group 0): 0 qkv [*, (Hq + 2 Hkv) * head_dim] read, 1 q_norm [head_dim] read, 2 k_norm [head_dim]
//                     read, 3 rope_table [rotary_dim / 2 + 1] read, 4 q_out [*, Hq * head_dim] read_write,
//                     5 k_cache pool (KV_TYPE words) read_write, 6 v_cache pool read_write,
//                     7 table [seq_len] RowEntry read, 8 kv_table (every sequence's block ids) u32 read,
//                     9 params uniform (qkv_rope_store's; seq_len: the table's entries, position_offset unused).
// Dispatch: seq_len * (Hq + Hkv) workgroups, folded as (min(W, 65535), ceil(W / x), 1). head_dim <= 256.

//!include qkv_rope_operands.wgsl
//!include row_table.wgsl

@group(0) @binding(7) var<storage, read> table: array<RowEntry>;
@group(0) @binding(8) var<storage, read> kv_table: array<u32>;
@group(0) @binding(9) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 64u;
//!include head_store.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its head, so this return keeps the barriers in uniform control flow.
  let item = wid.x + wid.y * nwg.x;
  let heads = params.num_q_heads + params.num_kv_heads;
  if (item >= params.seq_len * heads) {
    return;
  }
  let entry = table[item / heads];
  store_head(entry.row, item % heads, entry.position, entry.table_base, lid);
}
