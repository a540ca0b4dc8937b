// QKV split + q/k RMSNorm + rotary + KV-cache store, one workgroup of 64 per (token t, head h) over the
// num_q_heads + num_kv_heads q and k heads. Row t of qkv holds [q heads; k heads; v heads], head_dim each.
// For a q or k head x (position p = position_offset + t):
//   y = x / sqrt(mean(x^2) + eps) * norm_weight   if use_qk_norm (q_norm for q heads, k_norm for k heads),
//   for i < r/2, r = rotary_dim (rotate-half, Hugging Face convention), angle a = f32(p) * inv_freq[i]:
//     out[i]       = y[i] * cos(a) - y[i + r/2] * sin(a)
//     out[i + r/2] = y[i + r/2] * cos(a) + y[i] * sin(a)
//   and out[d] = y[d] for d >= r. q heads go to q_out[t, h]; k head j to k_cache[p, j], and the workgroup of
//   k head j also copies v head j unchanged to v_cache[p, j]. The caches hold KV_TYPE elements (kv_cache.wgsl);
//   for f16 (head_dim even) a thread computes two neighbouring dims and stores their word whole.
// Bindings (group 0): 0 qkv [T, (Hq + 2 Hkv) * head_dim] read, 1 q_norm [head_dim] read, 2 k_norm [head_dim]
//                     read, 3 inv_freq [rotary_dim / 2] read, 4 q_out [T, Hq * head_dim] read_write,
//                     5 k_cache [capacity, Hkv * head_dim] (KV_TYPE words) read_write, 6 v_cache (as k_cache) read_write,
//                     7 params uniform (eps as f32 bits).
// Dispatch: T * (Hq + Hkv) workgroups, folded as (min(W, 65535), ceil(W / x), 1). head_dim <= 256.

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
@group(0) @binding(3) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(7) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 64u;
const MAX_HEAD_DIM: u32 = 256u;

var<workgroup> head: array<f32, MAX_HEAD_DIM>;  // the head's input values: rotation pairs cross threads
//!include workgroup_reduce.wgsl
//!include kv_cache.wgsl

// Element d of the head after the optional RMSNorm (inv_rms is 1 without it).
fn normed(d: u32, inv_rms: f32, is_q: bool) -> f32 {
  if (params.use_qk_norm == 0u) {
    return head[d];
  }
  let w = select(k_norm[d], q_norm[d], is_q);
  return head[d] * inv_rms * w;
}

// Dim d of the head after the norm and the rotation at `position`.
fn rotated(d: u32, inv_rms: f32, is_q: bool, position: u32) -> f32 {
  var value = normed(d, inv_rms, is_q);
  let half_rotary = params.rotary_dim / 2u;
  if (d < params.rotary_dim) {
    let first_half = d < half_rotary;
    let i = select(d - half_rotary, d, first_half);
    let angle = f32(position) * inv_freq[i];
    let c = cos(angle);
    let s = sin(angle);
    if (first_half) {
      value = value * c - normed(d + half_rotary, inv_rms, is_q) * s;
    } else {
      value = value * c + normed(d - half_rotary, inv_rms, is_q) * s;
    }
  }
  return value;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its head, so this return keeps the barriers in uniform control flow.
  let item = wid.x + wid.y * nwg.x;
  let Hq = params.num_q_heads;
  let Hkv = params.num_kv_heads;
  if (item >= params.seq_len * (Hq + Hkv)) {
    return;
  }
  let t = item / (Hq + Hkv);
  let h = item % (Hq + Hkv);  // q heads first, then k heads: also their order within the qkv row
  let is_q = h < Hq;
  let D = params.head_dim;
  let row = t * (Hq + 2u * Hkv) * D;

  var sum_sq: f32 = 0.0;
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    let v = qkv[row + h * D + d];
    head[d] = v;
    sum_sq += v * v;
  }
  workgroupBarrier();
  var inv_rms: f32 = 1.0;
  if (params.use_qk_norm != 0u) {
    inv_rms = 1.0 / sqrt(workgroup_sum(lid, sum_sq) / f32(D) + bitcast<f32>(params.eps_bits));
  }

  let position = params.position_offset + t;
  let j = h - Hq;  // the kv head, for k heads
  let cache_row = (position * Hkv + j) * D;
  let v_row = row + (Hq + Hkv + j) * D;
  let per_word = kv_per_word();
  for (var w = lid; w * per_word < D; w += WORKGROUP_SIZE) {
    let d = w * per_word;
    let value = rotated(d, inv_rms, is_q, position);
    // The word's second element (f16 only: an f32 word holds one).
    let next = min(d + 1u, D - 1u);
    if (is_q) {
      q_out[(t * Hq + h) * D + d] = value;
      if (per_word == 2u) {
        q_out[(t * Hq + h) * D + d + 1u] = rotated(d + 1u, inv_rms, is_q, position);
      }
    } else {
      k_cache[kv_word(cache_row + d)] = kv_pack(value, rotated(next, inv_rms, is_q, position));
      v_cache[kv_word(cache_row + d)] = kv_pack(qkv[v_row + d], qkv[v_row + next]);
    }
  }
}
