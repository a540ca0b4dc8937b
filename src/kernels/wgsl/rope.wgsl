// RoPE, in place on q and k: in every head, pair i rotates elements (2i, 2i+1) by
// theta = (position_offset + t) * base^(-2i / head_dim):
//   x'[2i]   = x[2i] * cos(theta) - x[2i+1] * sin(theta)
//   x'[2i+1] = x[2i] * sin(theta) + x[2i+1] * cos(theta)
// One thread per (t, head, pair) over max(num_q_heads, num_kv_heads) heads; a thread whose head is past a
// tensor's head count leaves that tensor alone (q and k may have different head counts under GQA).
// Bindings (group 0): 0 q [T, num_q_heads * head_dim] read_write, 1 k [T, num_kv_heads * head_dim]
//                     read_write, 2 params uniform (base as f32 bits).
// Dispatch: W = ceil(T * max(num_q_heads, num_kv_heads) * head_dim / 2 / 256) workgroups of 256, folded as
// (min(W, 65535), ceil(W / x), 1).

struct Params {
  seq_len: u32,
  num_q_heads: u32,
  num_kv_heads: u32,
  head_dim: u32,
  rope_base_bits: u32,
  position_offset: u32,
}

@group(0) @binding(0) var<storage, read_write> q: array<f32>;
@group(0) @binding(1) var<storage, read_write> k: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

fn rotate(x: vec2<f32>, c: f32, s: f32) -> vec2<f32> {
  return vec2<f32>(x.x * c - x.y * s, x.x * s + x.y * c);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  let half_dim = params.head_dim / 2u;
  let heads = max(params.num_q_heads, params.num_kv_heads);
  if (idx >= params.seq_len * heads * half_dim) {
    return;
  }
  let t = idx / (heads * half_dim);
  let head = (idx / half_dim) % heads;
  let pair = idx % half_dim;

  let base = bitcast<f32>(params.rope_base_bits);
  let inv_freq = pow(base, -f32(2u * pair) / f32(params.head_dim));
  let theta = f32(params.position_offset + t) * inv_freq;
  let c = cos(theta);
  let s = sin(theta);

  if (head < params.num_q_heads) {
    let i = (t * params.num_q_heads + head) * params.head_dim + 2u * pair;
    let r = rotate(vec2<f32>(q[i], q[i + 1u]), c, s);
    q[i] = r.x;
    q[i + 1u] = r.y;
  }
  if (head < params.num_kv_heads) {
    let i = (t * params.num_kv_heads + head) * params.head_dim + 2u * pair;
    let r = rotate(vec2<f32>(k[i], k[i + 1u]), c, s);
    k[i] = r.x;
    k[i + 1u] = r.y;
  }
}
