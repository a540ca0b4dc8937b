// GELU, tanh approximation: output[i] = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
// one thread per element.
// Bindings (group 0): 0 input [count] read, 1 output [count] read_write, 2 params uniform.
// Dispatch: W = ceil(count / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

struct Params {
  count: u32,
}

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
const SQRT_2_OVER_PI: f32 = 0.7978845608;
const GELU_COEFF: f32 = 0.044715;
// 0.5 * (1 + tanh(u)) equals 1 / (1 + exp(-2u)), so gelu(x) = x / (1 + exp(-2u)): the same function,
// without the cancellation of 1 + tanh(u) near -1 that costs f32 most of its digits for x < -2. For very
// negative x, exp overflows to inf and x / inf gives the correct limit, -0.
fn gelu(x: f32) -> f32 {
  let u = SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x);
  return x / (1.0 + exp(-2.0 * u));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  if (idx >= params.count) {
    return;
  }
  output[idx] = gelu(input[idx]);
}
