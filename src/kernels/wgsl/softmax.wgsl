// Softmax of each row: output[r, i] = exp(input[r, i] - max) / sum(exp(input[r, :] - max)).
// One workgroup of 256 per row, three passes: a tree reduction for the row max, one for the sum of
// exponentials, then each thread writes its normalised elements (recomputing the exponentials).
// Bindings (group 0): 0 input [num_rows, row_size] read, 1 output [num_rows, row_size] read_write,
//                     2 params uniform.
// Dispatch: num_rows workgroups, folded as (min(num_rows, 65535), ceil(num_rows / x), 1).

struct Params {
  num_rows: u32,
  row_size: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
const LOWEST_F32: f32 = -3.4028234e38;  // stands in for -inf, which WGSL cannot write as a constant

//!include workgroup_reduce.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its row, so this return keeps the barriers in uniform control flow.
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.num_rows) {
    return;
  }
  let n = params.row_size;
  let base = row * n;

  var local_max = LOWEST_F32;
  for (var i = lid; i < n; i += WORKGROUP_SIZE) {
    local_max = max(local_max, input[base + i]);
  }
  let row_max = workgroup_max(lid, local_max);

  var local_sum: f32 = 0.0;
  for (var i = lid; i < n; i += WORKGROUP_SIZE) {
    local_sum += exp(input[base + i] - row_max);
  }
  let row_sum = workgroup_sum(lid, local_sum);

  for (var i = lid; i < n; i += WORKGROUP_SIZE) {
    output[base + i] = exp(input[base + i] - row_max) / row_sum;
  }
}
