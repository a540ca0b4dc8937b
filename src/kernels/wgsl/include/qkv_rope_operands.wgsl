// What qkv_rope_store.wgsl and rope_store_rows.wgsl share: the uniform struct (kernels::QkvRopeParams; eps as f32
// bits) and bindings 0 to 6, the operands head_store.wgsl reads and writes. Each kernel binds its own params.
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

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> q_norm: array<f32>;
@group(0) @binding(2) var<storage, read> k_norm: array<f32>;
@group(0) @binding(3) var<storage, read> rope_table: array<f32>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
