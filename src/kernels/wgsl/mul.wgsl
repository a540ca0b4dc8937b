// Mul (the SwiGLU combine silu(gate) * up): output[i] = a[i] * b[i], one thread per element.
// Bindings (group 0): 0 a [count] read, 1 b [count] read, 2 output [count] read_write, 3 params uniform.
// Dispatch: W = ceil(count / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

struct Params {
  count: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  if (idx >= params.count) {
    return;
  }
  output[idx] = a[idx] * b[idx];
}
