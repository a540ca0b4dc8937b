// Gated activation (SwiGLU / GeGLU): out[t, i] = act(gate_up[t, i]) * gate_up[t, I + i], where each row of
// gate_up holds the gate half then the up half, act = SiLU (activation 0) or tanh-approximated GELU (1).
// One thread per output element.
// Bindings (group 0): 0 gate_up [T, 2 * intermediate] read, 1 out [T, intermediate] read_write, 2 params uniform.
// Dispatch: W = ceil(T * intermediate / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include gated_act_params.wgsl

@group(0) @binding(0) var<storage, read> gate_up: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

//!include activations.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  let I = params.intermediate;
  if (idx >= params.seq_len * I) {
    return;
  }
  let base = (idx / I) * 2u * I + idx % I;
  let gate = gate_up[base];
  let act = select(silu(gate), gelu(gate), params.activation == 1u);
  out[idx] = act * gate_up[base + I];
}
