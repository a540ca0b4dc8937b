// Gated activation, vectorised: the contract of gated_act.wgsl, out[t, i] = act(gate_up[t, i]) *
// gate_up[t, I + i], for an intermediate size I that is a multiple of 4 (kernels::gated_act runs
// gated_act.wgsl for other sizes). One vec4 of the output per thread: the gate and up pieces are 128-bit loads
// and the result a 128-bit store, where the scalar kernel issues a 32-bit load or store per element (on an
// H200 it moved the same bytes as mul_vec4 at two thirds of its speed).
// Bindings (group 0): 0 gate_up [T, 2 * intermediate] read, 1 out [T, intermediate] read_write, 2 params uniform;
//                     the arrays are bound as vec4<f32>.
// Dispatch: W = ceil(T * intermediate / 4 / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include gated_act_params.wgsl

@group(0) @binding(0) var<storage, read> gate_up: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

//!include activations.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;  // vec4 of the output
  let I4 = params.intermediate / 4u;
  if (idx >= params.seq_len * I4) {
    return;
  }
  let base = (idx / I4) * 2u * I4 + idx % I4;
  let gate = gate_up[base];
  let act = select(silu4(gate), gelu4(gate), params.activation == 1u);
  out[idx] = act * gate_up[base + I4];
}
