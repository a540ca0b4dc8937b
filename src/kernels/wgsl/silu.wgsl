// SiLU: output[i] = input[i] / (1 + exp(-input[i])), one thread per element.
// Bindings (group 0): 0 input [count] read, 1 output [count] read_write, 2 params uniform.
// Dispatch: W = ceil(count / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

struct Params {
  count: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

// For x < 0 the same value is computed as x * exp(x) / (1 + exp(x)): exp(-x) would overflow for very
// negative x, and x / inf is NaN or garbage on GPUs whose division is only accurate for finite operands.
fn silu(x: f32) -> f32 {
  let e = exp(-abs(x));
  return select(x * e, x, x >= 0.0) / (1.0 + e);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  if (idx >= params.count) {
    return;
  }
  output[idx] = silu(input[idx]);
}
