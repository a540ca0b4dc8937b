// The uniform struct of qkv_rope_store.wgsl and rope_store_rows.wgsl (kernels::QkvRopeParams; eps as f32 bits).
struct Params {
  seq_len: u32,
  num_q_heads: u32,
  num_kv_heads: u32,
  head_dim: u32,
  rotary_dim: u32,
  position_offset: u32,
  use_qk_norm: u32,
  eps_bits: u32,
}
