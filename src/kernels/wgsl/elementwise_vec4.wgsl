// Element-wise kernels, vectorised: add, mul, SiLU and GELU-tanh (the contracts of add.wgsl, mul.wgsl,
// silu.wgsl and gelu.wgsl) with one vec4 (128-bit loads and store) per thread, for counts that are a
// multiple of 4 (the dispatchers run the seed kernels for other counts). The override OP picks the
// operation: 0 add (a + b), 1 mul (a * b), 2 SiLU (of a), 3 GELU-tanh (of a). The unary operations never
// read b (the dispatcher binds the input there too, as the layout has the binding).
// Bindings (group 0): 0 a [count] read, 1 b [count] read, 2 output [count] read_write, 3 params uniform;
//                     the arrays are bound as vec4<f32>.
// Dispatch: W = ceil(count / 4 / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

struct Params {
  count: u32,
}

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> output: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

override OP: u32 = 0u;

const WORKGROUP_SIZE: u32 = 256u;

//!include activations.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  if (idx >= params.count / 4u) {
    return;
  }
  let x = a[idx];
  switch OP {
    case 0u: {
      output[idx] = x + b[idx];
    }
    case 1u: {
      output[idx] = x * b[idx];
    }
    case 2u: {
      output[idx] = silu4(x);
    }
    default: {
      output[idx] = gelu4(x);
    }
  }
}
