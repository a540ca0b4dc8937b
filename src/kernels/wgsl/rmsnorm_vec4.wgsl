// RMSNorm, vectorised: the contract of rmsnorm.wgsl, output[t, d] = input[t, d] / sqrt(mean(input[t, :]^2)
// + eps) * weight[d], for rows of a whole number of vec4s (hidden_size % 4 == 0; the dispatcher runs
// rmsnorm.wgsl for other sizes). One workgroup of 256 per row: thread i handles the vec4s i, i + 256, ...
// of its row (128-bit loads and stores, coalesced), keeping the first CACHED of them in registers so the
// row is read from memory once for rows up to 4096 wide. The row sum of squares is reduced in workgroup
// memory in two levels (16 partial sums of 16, then every thread adds the 16): two barriers instead of a
// tree's eight, and no subgroup feature needed.
// Bindings (group 0): 0 input [T, hidden_size] read, 1 weight [hidden_size] read,
//                     2 output [T, hidden_size] read_write, 3 params uniform (eps as f32 bits);
//                     the arrays are bound as vec4<f32>.
// Dispatch: T workgroups, folded as (min(T, 65535), ceil(T / x), 1).

//!include norm_params.wgsl

@group(0) @binding(0) var<storage, read> input: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weight: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> output: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
const LANES: u32 = 16u;  // WORKGROUP_SIZE == LANES * LANES
const CACHED: u32 = 4u;  // vec4s per thread kept in registers between the reduction and the write

var<workgroup> partial: array<f32, WORKGROUP_SIZE>;
var<workgroup> partial16: array<f32, LANES>;

// The sum of `value` over the workgroup, returned to every thread. Call once, from uniform control flow.
fn workgroup_sum(lid: u32, value: f32) -> f32 {
  partial[lid] = value;
  workgroupBarrier();
  if (lid < LANES) {
    var sum: f32 = 0.0;
    for (var k: u32 = 0u; k < LANES; k++) {
      sum += partial[lid + k * LANES];  // consecutive threads read consecutive banks
    }
    partial16[lid] = sum;
  }
  workgroupBarrier();
  var total: f32 = 0.0;
  for (var k: u32 = 0u; k < LANES; k++) {
    total += partial16[k];  // the same address for every thread: a broadcast
  }
  return total;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its row, so this return keeps the barriers in uniform control flow.
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.seq_len) {
    return;
  }
  let D4 = params.hidden_size / 4u;
  let base = row * D4;

  var cache: array<vec4<f32>, CACHED>;
  var sum_sq = vec4<f32>(0.0);
  for (var k: u32 = 0u; k < CACHED; k++) {
    let d4 = lid + k * WORKGROUP_SIZE;
    if (d4 < D4) {
      let x = input[base + d4];
      cache[k] = x;
      sum_sq += x * x;
    }
  }
  for (var d4 = lid + CACHED * WORKGROUP_SIZE; d4 < D4; d4 += WORKGROUP_SIZE) {
    let x = input[base + d4];
    sum_sq += x * x;
  }
  let total = workgroup_sum(lid, sum_sq.x + sum_sq.y + sum_sq.z + sum_sq.w);

  let inv_rms = 1.0 / sqrt(total / f32(params.hidden_size) + bitcast<f32>(params.eps_bits));
  for (var k: u32 = 0u; k < CACHED; k++) {
    let d4 = lid + k * WORKGROUP_SIZE;
    if (d4 < D4) {
      output[base + d4] = cache[k] * inv_rms * weight[d4];
    }
  }
  for (var d4 = lid + CACHED * WORKGROUP_SIZE; d4 < D4; d4 += WORKGROUP_SIZE) {
    output[base + d4] = input[base + d4] * inv_rms * weight[d4];
  }
}
