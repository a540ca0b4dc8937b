// Greedy sampling on the GPU: for each of `rows` rows of `count` logits (row r from logits[r * row_stride]),
// the index of the largest (the lowest index on ties, like torch.argmax; NaN never wins; NONE = 0xFFFFFFFF
// when every logit is NaN), written to next_ids[r] — the input of the next decode step, so the token never has
// to visit the host before the next step runs — and to history[slot + r], for the host to read back. Several
// rows: a batched step's sequences, all picked by the same two dispatches.
// Two dispatches of this shader, because one workgroup striding over a vocabulary of 150k logits is
// latency-bound (~200 us on an H200):
// * FINAL false: PARTIALS workgroups per row each reduce one contiguous chunk of its logits to its best
//   (value, index), stored as the pair partials[2w], partials[2w + 1] (w = row * PARTIALS + chunk; value bits,
//   index; index 0xFFFFFFFF when the chunk is empty or all NaN);
// * FINAL true: one workgroup per row reduces the row's PARTIALS pairs and writes the winner.
// Bindings (group 0): 0 logits [(rows - 1) * row_stride + count] read, 1 next_ids [>= rows] u32 read_write,
//                     2 history [>= slot + rows] u32 read_write, 3 partials [2 * PARTIALS * rows] u32
//                     read_write, 4 params uniform.
// Dispatch: (PARTIALS, rows, 1) with FINAL false, then (1, rows, 1) with FINAL true.
//!include token_order.wgsl

struct Params {
  count: u32,
  slot: u32,
  rows: u32,  // the grid's y (kept for the dispatcher's checks)
  row_stride: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> next_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> history: array<u32>;
@group(0) @binding(3) var<storage, read_write> partials: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

override FINAL: bool = false;
override PARTIALS: u32 = 256u;  // kernels/model.h kArgmaxPartials, set by the dispatcher
const WORKGROUP_SIZE: u32 = 256u;
var<workgroup> best_value: array<f32, WORKGROUP_SIZE>;
var<workgroup> best_index: array<u32, WORKGROUP_SIZE>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y;
  let first_partial = row * PARTIALS;
  var value = -3.4028234e38;
  var index = NONE;
  if (FINAL) {
    for (var p = lid; p < PARTIALS; p += WORKGROUP_SIZE) {
      let v = bitcast<f32>(partials[2u * (first_partial + p)]);
      let i = partials[2u * (first_partial + p) + 1u];
      if (before(v, i, value, index)) {
        value = v;
        index = i;
      }
    }
  } else {
    let chunk = (params.count + PARTIALS - 1u) / PARTIALS;
    let end = min(wid.x * chunk + chunk, params.count);
    let base = row * params.row_stride;
    for (var i = wid.x * chunk + lid; i < end; i += WORKGROUP_SIZE) {
      let v = logits[base + i];
      // Each thread visits increasing indices, so `>` keeps the first maximum.
      if (!is_nan(v) && before(v, i, value, index)) {
        value = v;
        index = i;
      }
    }
  }
  best_value[lid] = value;
  best_index[lid] = index;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride && before(best_value[lid + stride], best_index[lid + stride], best_value[lid], best_index[lid])) {
      best_value[lid] = best_value[lid + stride];
      best_index[lid] = best_index[lid + stride];
    }
    workgroupBarrier();
  }
  if (lid != 0u) {
    return;
  }
  if (FINAL) {
    let winner = best_index[0];  // NONE when every logit is NaN: the host stops on it
    next_ids[row] = winner;
    history[params.slot + row] = winner;
  } else {
    partials[2u * (first_partial + wid.x)] = bitcast<u32>(best_value[0]);
    partials[2u * (first_partial + wid.x) + 1u] = best_index[0];
  }
}
