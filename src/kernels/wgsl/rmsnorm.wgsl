// RMSNorm: output[t, d] = input[t, d] / sqrt(mean(input[t, :]^2) + eps) * weight[d].
// One workgroup of 256 per row: each thread sums the squares of elements tid, tid + 256, ..., a tree
// reduction in workgroup memory gives the row total, then each thread scales its elements.
// Bindings (group 0): 0 input [T, hidden_size] read, 1 weight [hidden_size] read,
//                     2 output [T, hidden_size] read_write, 3 params uniform (eps as f32 bits).
// Dispatch: T workgroups, folded as (min(T, 65535), ceil(T / x), 1).

//!include norm_params.wgsl

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

//!include workgroup_reduce.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its row, so this return keeps the barriers in uniform control flow.
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.seq_len) {
    return;
  }
  let D = params.hidden_size;
  let base = row * D;

  var sum_sq: f32 = 0.0;
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    let x = input[base + d];
    sum_sq += x * x;
  }
  let total = workgroup_sum(lid, sum_sq);

  let inv_rms = 1.0 / sqrt(total / f32(D) + bitcast<f32>(params.eps_bits));
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    output[base + d] = input[base + d] * inv_rms * weight[d];
  }
}
