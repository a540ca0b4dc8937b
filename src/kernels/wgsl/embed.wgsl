// Embed, one vocabulary block: for every token t in [first_row, first_row + seq_len) whose id lies in
// [vocab_offset, vocab_offset + vocab_rows),
//   out[t, d] = scale * table[id - vocab_offset, d]
//               (+ positions[position_offset + t - first_row, d] if use_positions);
// tokens of other blocks are left untouched (and their ids never index the table), so a table split into
// blocks is gathered by one dispatch per block. One thread per output element (embed_vec4.wgsl: four, where
// hidden_size % 4 == 0).
// Table elements are decoded by WEIGHT_TYPE: 0 f32 bits, 1 f16, 2 bf16 (two 16-bit values per u32, the
// lower-indexed element in the low half).
// Bindings (group 0): 0 ids [first_row + T] u32 read, 1 table [vocab_rows, hidden_size] read, 2 positions
//                     [*, hidden_size] read, 3 out [first_row + T, hidden_size] read_write, 4 params uniform
//                     (scale as f32 bits).
// Dispatch: W = ceil(T * hidden_size / 256) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include embed_params.wgsl

@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read> positions: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

//!include weights.wgsl
const WORKGROUP_SIZE: u32 = 256u;

fn table_at(e: u32) -> f32 {
  return weight_element(table[weight_word(e)], e);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let idx = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid;
  let D = params.hidden_size;
  if (idx >= params.seq_len * D) {
    return;
  }
  let i = idx / D;  // the i-th token gathered
  let t = params.first_row + i;
  let d = idx % D;
  // Unsigned wrap-around: ids below vocab_offset become huge and fail the same test as ids past the block.
  let row = ids[t] - params.vocab_offset;
  if (row >= params.vocab_rows) {
    return;
  }
  var value = bitcast<f32>(params.scale_bits) * table_at(row * D + d);
  if (params.use_positions != 0u) {
    value += positions[(params.position_offset + i) * D + d];
  }
  out[t * D + d] = value;
}
