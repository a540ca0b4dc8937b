// The row table of a batched step (kernels/batched.h RowEntry), read by rope_store_rows.wgsl and
// attention_rows.wgsl: entry i names an activation row (of qkv, q and the attention output), the cache element
// where its sequence's slot begins in the layer's pool, and the row's position in that slot. Written once per
// step, so the kernels' uniforms stay fixed while the positions move.
struct RowEntry {
  row: u32,
  cache_base: u32,
  position: u32,
  _pad: u32,
}
