// Attention: causal scaled dot-product attention with grouped-query heads,
//   output[t, h] = softmax_j(Q[t, h] . K[j, kv] / sqrt(head_dim)) @ V[j, kv],
// with kv = h / (num_q_heads / num_kv_heads),
// where query t sits at position position_offset + t and attends keys j <= position_offset + t (j < S).
// One workgroup of 256 per (query t, q head); correctness first: thread 0 does all the work. Pass 1 finds
// the largest score; pass 2 adds up exp(score - max) and the exp-weighted V rows directly in the output
// row (no array sized by S), which is divided by the sum at the end.
// Bindings (group 0): 0 Q [T, num_q_heads * head_dim] read, 1 K [S, num_kv_heads * head_dim] read,
//                     2 V [S, num_kv_heads * head_dim] read, 3 output [T, num_q_heads * head_dim] read_write,
//                     4 params uniform.
// Dispatch: (T, num_q_heads, 1).

struct Params {
  T: u32,
  S: u32,
  num_q_heads: u32,
  num_kv_heads: u32,
  head_dim: u32,
  position_offset: u32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<f32>;
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read_write> output: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
const LOWEST_F32: f32 = -3.4028234e38;  // stands in for -inf, which WGSL cannot write as a constant

// Q[q_base .. q_base + head_dim] . K[k_base .. k_base + head_dim], scaled.
fn score(q_base: u32, k_base: u32, scale: f32) -> f32 {
  var acc: f32 = 0.0;
  for (var d: u32 = 0u; d < params.head_dim; d++) {
    acc += Q[q_base + d] * K[k_base + d];
  }
  return acc * scale;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let h = wid.y;
  if (lid != 0u || t >= params.T || h >= params.num_q_heads) {
    return;
  }
  let head_dim = params.head_dim;
  let kv_stride = params.num_kv_heads * head_dim;
  let kv_offset = (h / (params.num_q_heads / params.num_kv_heads)) * head_dim;
  let q_base = (t * params.num_q_heads + h) * head_dim;
  let keys = min(params.position_offset + t + 1u, params.S);
  let scale = 1.0 / sqrt(f32(head_dim));

  var max_score = LOWEST_F32;
  for (var j: u32 = 0u; j < keys; j++) {
    max_score = max(max_score, score(q_base, j * kv_stride + kv_offset, scale));
  }

  for (var d: u32 = 0u; d < head_dim; d++) {
    output[q_base + d] = 0.0;
  }
  var sum: f32 = 0.0;
  for (var j: u32 = 0u; j < keys; j++) {
    let kv_base = j * kv_stride + kv_offset;
    let w = exp(score(q_base, kv_base, scale) - max_score);
    sum += w;
    for (var d: u32 = 0u; d < head_dim; d++) {
      output[q_base + d] += w * V[kv_base + d];
    }
  }
  for (var d: u32 = 0u; d < head_dim; d++) {
    output[q_base + d] /= sum;
  }
}
