// The row table of a batched step (kernels/batched.h RowEntry), read by rope_store_rows.wgsl and
// attention_rows.wgsl: entry i names an activation row (of qkv, q and the attention output), the first entry of
// its sequence's block table in kv_table (kv_blocks.wgsl), and the row's position in that sequence. Written once per
// step, so the kernels' uniforms stay fixed while the positions move.
struct RowEntry {
  row: u32,
  table_base: u32,
  position: u32,
  _pad: u32,
}
