// Query-blocked flash attention for prefill: the same attention as flash_attention.wgsl (causal GQA, sliding
// window, online softmax), but one workgroup of 256 serves BLOCK_Q consecutive queries of one q head, so each
// K/V row is read from memory once per block instead of once per query.
// Per tile of KEY_TILE keys: the K rows go to workgroup memory and every thread scores (query, key) pairs
// from it; threads q < BLOCK_Q then fold row q into its query's running max / denominator (masking keys
// outside the query's causal window) and turn the scores into weights, while all threads load the V rows
// over the K rows; finally each thread adds weights * V into the output dims it owns (output i = lid + 256 r
// is query i / head_dim, dim i % head_dim), rescaled when its query's max grows.
// Rows in workgroup memory are head_dim + 1 floats apart, so threads reading one dim of different rows hit
// different banks. Tile sizes come from kernels/model.cpp (flash_block_shape) to fit the workgroup memory.
// Bindings and params: those of flash_attention.wgsl (head_dim must equal HEAD_DIM).
// Dispatch: (min(blocks, 65535), num_q_heads, ceil(blocks / 65535)), blocks = ceil(T / BLOCK_Q);
// block = wid.x + wid.z * num_workgroups.x.

struct Params {
  T: u32,
  S: u32,
  num_q_heads: u32,
  num_kv_heads: u32,
  head_dim: u32,
  position_offset: u32,
  window: u32,
  scale_bits: u32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<f32>;
@group(0) @binding(2) var<storage, read> V: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

override BLOCK_Q: u32 = 16u;
override KEY_TILE: u32 = 32u;
override HEAD_DIM: u32 = 64u;
const WORKGROUP_SIZE: u32 = 256u;
const MAX_OUTPUTS: u32 = 16u;  // BLOCK_Q * HEAD_DIM / WORKGROUP_SIZE, rounded up, at most
const LOWEST_F32: f32 = -3.4028234e38;  // stands in for -inf, which WGSL cannot write as a constant

override ROW: u32 = HEAD_DIM + 1u;  // derived, not set by the host
var<workgroup> q_rows: array<f32, BLOCK_Q * ROW>;
var<workgroup> kv_rows: array<f32, KEY_TILE * ROW>;
var<workgroup> weights: array<f32, BLOCK_Q * KEY_TILE>;  // [query, key]: scores, then softmax weights
var<workgroup> row_max: array<f32, BLOCK_Q>;
var<workgroup> row_sum: array<f32, BLOCK_Q>;
var<workgroup> row_rescale: array<f32, BLOCK_Q>;

fn first_key(position: u32) -> u32 {
  if (params.window != 0u && position >= params.window) {
    return position + 1u - params.window;
  }
  return 0u;
}

// Rows start .. start + keys - 1 of `K` (is_value false) or `V` into kv_rows; rows past `keys` are zeroed.
fn load_rows(lid: u32, is_value: bool, start: u32, keys: u32, kv_offset: u32) {
  let kv_stride = params.num_kv_heads * HEAD_DIM;
  for (var i = lid; i < KEY_TILE * HEAD_DIM; i += WORKGROUP_SIZE) {
    let k = i / HEAD_DIM;
    let d = i % HEAD_DIM;
    var value: f32 = 0.0;
    if (k < keys) {
      let index = (start + k) * kv_stride + kv_offset + d;
      if (is_value) {
        value = V[index];
      } else {
        value = K[index];
      }
    }
    kv_rows[k * ROW + d] = value;
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t0 = (wid.x + wid.z * nwg.x) * BLOCK_Q;
  let h = wid.y;
  if (t0 >= params.T) {  // uniform over the workgroup: the barriers below stay in uniform control flow
    return;
  }
  let t_end = min(params.T, t0 + BLOCK_Q);
  let kv_offset = (h / (params.num_q_heads / params.num_kv_heads)) * HEAD_DIM;
  let scale = bitcast<f32>(params.scale_bits);
  // The block's keys run from its first query's first key to its last query's position.
  let block_first = first_key(params.position_offset + t0);
  let block_last = params.position_offset + t_end - 1u;

  for (var i = lid; i < BLOCK_Q * HEAD_DIM; i += WORKGROUP_SIZE) {
    let r = i / HEAD_DIM;
    let d = i % HEAD_DIM;
    var value: f32 = 0.0;
    if (t0 + r < t_end) {
      value = Q[((t0 + r) * params.num_q_heads + h) * HEAD_DIM + d];
    }
    q_rows[r * ROW + d] = value;
  }
  if (lid < BLOCK_Q) {
    row_max[lid] = LOWEST_F32;
    row_sum[lid] = 0.0;
  }
  var acc: array<f32, MAX_OUTPUTS>;
  workgroupBarrier();

  for (var start = block_first; start <= block_last; start += KEY_TILE) {
    let keys = min(KEY_TILE, block_last + 1u - start);
    load_rows(lid, false, start, keys, kv_offset);
    workgroupBarrier();

    for (var i = lid; i < BLOCK_Q * KEY_TILE; i += WORKGROUP_SIZE) {
      let q_base = (i / KEY_TILE) * ROW;
      let k_base = (i % KEY_TILE) * ROW;
      var dot: f32 = 0.0;
      // A bound known only at run time: a constant one gets this loop fully unrolled, which makes
      // lavapipe's compile take minutes.
      for (var d: u32 = 0u; d < params.head_dim; d++) {
        dot += q_rows[q_base + d] * kv_rows[k_base + d];
      }
      weights[i] = dot * scale;
    }
    workgroupBarrier();

    if (lid < BLOCK_Q) {
      // Keys outside [first_key(p), p] get weight 0; a row with no visible key yet keeps max LOWEST_F32
      // and a rescale of exp(0) = 1 on zero sums. Rows past T are never written out.
      let position = params.position_offset + t0 + lid;
      let first = first_key(position);
      let old_max = row_max[lid];
      var new_max = old_max;
      for (var k: u32 = 0u; k < keys; k++) {
        let j = start + k;
        if (j >= first && j <= position) {
          new_max = max(new_max, weights[lid * KEY_TILE + k]);
        }
      }
      var sum: f32 = 0.0;
      for (var k: u32 = 0u; k < keys; k++) {  // weights past `keys` are never read
        let j = start + k;
        let visible = j >= first && j <= position;
        let weight = select(0.0, exp(weights[lid * KEY_TILE + k] - new_max), visible);
        weights[lid * KEY_TILE + k] = weight;
        sum += weight;
      }
      let rescale = exp(old_max - new_max);
      row_rescale[lid] = rescale;
      row_sum[lid] = row_sum[lid] * rescale + sum;
      row_max[lid] = new_max;
    }
    load_rows(lid, true, start, keys, kv_offset);  // the scores are done with the K rows
    workgroupBarrier();

    for (var r: u32 = 0u; r < MAX_OUTPUTS; r++) {
      let i = lid + r * WORKGROUP_SIZE;
      if (i < BLOCK_Q * HEAD_DIM) {
        let q = i / HEAD_DIM;
        let d = i % HEAD_DIM;
        var a = acc[r] * row_rescale[q];
        for (var k: u32 = 0u; k < keys; k++) {
          a += weights[q * KEY_TILE + k] * kv_rows[k * ROW + d];
        }
        acc[r] = a;
      }
    }
    workgroupBarrier();  // everyone is done with kv_rows and weights before the next tile
  }

  for (var r: u32 = 0u; r < MAX_OUTPUTS; r++) {
    let i = lid + r * WORKGROUP_SIZE;
    let q = i / HEAD_DIM;
    if (i < BLOCK_Q * HEAD_DIM && t0 + q < t_end) {
      out[((t0 + q) * params.num_q_heads + h) * HEAD_DIM + i % HEAD_DIM] = acc[r] / row_sum[q];
    }
  }
}
