// The second pass of a prompt linear split along K (linear_tiled.wgsl with SPLIT_K > 1): adds the parts'
// partial sums and applies linear's epilogue,
//   out[m, out_col + n] = sum_s partials[s, m, n] + bias[n] (+ residual[m, out_col + n]).
// Bindings (group 0): 0 partials [SPLIT_K, M, N] read, 1 bias [N] read, 2 residual [M, out_stride] read,
//                     3 out [M, out_stride] read_write, 4 params uniform (linear's LinearParams).
// Dispatch: ceil(M * N / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / 65535), 1); one
// output per thread.

//!include linear_params.wgsl

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read> residual: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

//!include linear_store.wgsl

override SPLIT_K: u32 = 2u;
const WORKGROUP_SIZE: u32 = 256u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  let outputs = params.M * params.N;
  if (i >= outputs) {
    return;
  }
  var sum: f32 = 0.0;
  for (var s: u32 = 0u; s < SPLIT_K; s++) {
    sum += partials[s * outputs + i];
  }
  store(i / params.N, i % params.N, sum);
}
