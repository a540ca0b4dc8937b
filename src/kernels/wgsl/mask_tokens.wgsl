// Constrained decoding on the GPU: the logits of the token ids a constraint rules out become NaN, which argmax.wgsl
// and sample.wgsl never pick, so a decode step's own pick obeys the constraint without its logits going to the
// host. allowed holds a bit per id (id i: bit i % 32 of word allowed_offset + i / 32; set: may be picked) for the
// row of logits at logits_offset (a batched step masks each sequence's row with its own words); logits from count
// on are left as they are (the pickers read only the first count).
// WGSL has no NaN literal (a constant expression may not produce one), so the NaN's bits come in params.
// Bindings (group 0): 0 logits [logits_offset + count] read_write, 1 allowed [allowed_offset + ceil(count / 32)] u32
// read, 2 params uniform.
// Dispatch: (ceil(count / 256), 1, 1), folded into y past 65,535 workgroups (kernels::mask_tokens).

struct Params {
  count: u32,
  masked_bits: u32,  // a quiet NaN's
  logits_offset: u32,
  allowed_offset: u32,
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;
@group(0) @binding(1) var<storage, read> allowed: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  if (i < params.count && ((allowed[params.allowed_offset + i / 32u] >> (i % 32u)) & 1u) == 0u) {
    logits[params.logits_offset + i] = bitcast<f32>(params.masked_bits);
  }
}
