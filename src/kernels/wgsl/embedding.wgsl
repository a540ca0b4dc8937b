// Embedding: output[t, d] = weight[input_ids[t], d], one thread per output element.
// Bindings (group 0): 0 input_ids [T] u32 read, 1 weight [vocab, hidden_size] read,
//                     2 output [T, hidden_size] read_write, 3 params uniform.
// Dispatch: W = ceil(T * hidden_size / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

struct Params {
  seq_len: u32,
  hidden_size: u32,
}

@group(0) @binding(0) var<storage, read> input_ids: array<u32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> output: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  if (idx >= params.seq_len * params.hidden_size) {
    return;
  }
  let t = idx / params.hidden_size;
  let d = idx % params.hidden_size;
  output[idx] = weight[input_ids[t] * params.hidden_size + d];
}
