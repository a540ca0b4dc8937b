// LayerNorm: output[t, d] = (input[t, d] - mean) / sqrt(variance + eps) * weight[d] + bias[d], with the
// mean and the biased (1/D) variance of row t. One workgroup of 256 per row, two tree reductions in
// workgroup memory (first the mean, then the sum of squared differences from it), then normalisation.
// Bindings (group 0): 0 input [T, hidden_size] read, 1 weight [hidden_size] read, 2 bias [hidden_size] read,
//                     3 output [T, hidden_size] read_write, 4 params uniform (eps as f32 bits).
// Dispatch: T workgroups, folded as (min(T, 65535), ceil(T / x), 1).

//!include norm_params.wgsl

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> output: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

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

  var sum: f32 = 0.0;
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    sum += input[base + d];
  }
  let mean = workgroup_sum(lid, sum) / f32(D);

  var sum_sq: f32 = 0.0;
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    let centred = input[base + d] - mean;
    sum_sq += centred * centred;
  }
  let variance = workgroup_sum(lid, sum_sq) / f32(D);

  let inv_std = 1.0 / sqrt(variance + bitcast<f32>(params.eps_bits));
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    output[base + d] = (input[base + d] - mean) * inv_std * weight[d] + bias[d];
  }
}
