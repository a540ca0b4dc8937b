// QKV split + q/k RMSNorm + rotary + KV-cache store, one workgroup of 64 per (token t, head h) over the
// num_q_heads + num_kv_heads q and k heads. Row t of qkv holds [q heads; k heads; v heads], head_dim each.
// For a q or k head x (position p = position_offset + t):
//   y = x / sqrt(mean(x^2) + eps) * norm_weight   if use_qk_norm (q_norm for q heads, k_norm for k heads),
//   for i < r/2, r = rotary_dim (rotate-half, Hugging Face convention), angle a = f32(p) * rope_table[i] and
//   s = rope_table[r/2] (the attention factor of YaRN and LongRoPE, else 1):
//     out[i]       = s * (y[i] * cos(a) - y[i + r/2] * sin(a))
//     out[i + r/2] = s * (y[i + r/2] * cos(a) + y[i] * sin(a))
//   and out[d] = y[d] for d >= r. q heads go to q_out[t, h]; k head j to k_cache[row(p), j], and the workgroup
//   of k head j also copies v head j unchanged to v_cache[row(p), j], row(p) the pool row of position p in the
//   sequence's block table kv_table (kv_blocks.wgsl). The caches hold KV_TYPE elements (kv_cache.wgsl);
//   for f16 (head_dim even) a thread computes two neighbouring dims and stores their word whole; for q8 (head_dim a
//   multiple of 4) a thread holds four, and the workgroup's max of |value| gives each row's scale (head_store.wgsl).
// Bindings (group 0): 0 qkv [T, (Hq + 2 Hkv) * head_dim] read, 1 q_norm [head_dim] read, 2 k_norm [head_dim]
//                     read, 3 rope_table [rotary_dim / 2 + 1] read, 4 q_out [T, Hq * head_dim] read_write,
//                     5 k_cache pool [blocks * KV_BLOCK_TOKENS, Hkv * head_dim] (KV_TYPE words) read_write,
//                     6 v_cache (as k_cache) read_write, 7 kv_table [ceil(capacity / KV_BLOCK_TOKENS)] u32 (the
//                     sequence's block ids) read, 8 params uniform (eps as f32 bits).
// Dispatch: T * (Hq + Hkv) workgroups, folded as (min(W, 65535), ceil(W / x), 1). head_dim <= 256.

//!include qkv_rope_operands.wgsl

@group(0) @binding(7) var<storage, read> kv_table: array<u32>;
@group(0) @binding(8) var<uniform> params: Params;

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
  let t = item / heads;
  store_head(t, item % heads, params.position_offset + t, 0u, lid);
}
