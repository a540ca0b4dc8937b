// RMSNorm, vectorised: the contract of rmsnorm.wgsl, output[t, d] = input[t, d] / sqrt(mean(input[t, :]^2)
// + eps) * weight[d], for rows of a whole number of vec4s (hidden_size % 4 == 0; the dispatcher runs
// rmsnorm.wgsl for other sizes). One workgroup of 256 per row: thread i handles the vec4s i, i + 256, ...
// of its row (128-bit loads and stores, coalesced), keeping the first CACHED of them in registers so the
// row is read from memory once for rows up to 4096 wide. The row sum of squares is reduced in workgroup
// memory in two levels (workgroup_reduce.wgsl's two-level sum): two barriers, no subgroup feature needed.
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
const CACHED: u32 = 4u;  // vec4s per thread kept in registers between the reduction and the write

//!include workgroup_reduce.wgsl

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
  let total = workgroup_sum_two_level(lid, sum_sq.x + sum_sq.y + sum_sq.z + sum_sq.w);

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
