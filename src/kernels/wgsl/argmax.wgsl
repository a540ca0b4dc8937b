// Greedy sampling on the GPU: the index of the largest of `count` logits (the lowest index on ties, like
// torch.argmax; NaN never wins; NONE = 0xFFFFFFFF when every logit is NaN), written to next_ids[0] — the
// input of the next decode step, so the token never has to visit the host before the next step runs — and to
// history[slot], for the host to read back.
// Two dispatches of this shader, because one workgroup striding over a vocabulary of 150k logits is
// latency-bound (~200 us on an H200):
// * FINAL false: PARTIALS workgroups each reduce one contiguous chunk of the logits to its best (value,
//   index), stored as the pair partials[2w], partials[2w + 1] (value bits, index; index 0xFFFFFFFF when the
//   chunk is empty or all NaN);
// * FINAL true: one workgroup reduces the PARTIALS pairs and writes the winner.
// Bindings (group 0): 0 logits [count] read, 1 next_ids [>= 1] u32 read_write, 2 history [> slot] u32
//                     read_write, 3 partials [2 * PARTIALS] u32 read_write, 4 params uniform.
// Dispatch: (PARTIALS, 1, 1) with FINAL false, then (1, 1, 1) with FINAL true.
//!include token_order.wgsl

struct Params {
  count: u32,
  slot: u32,
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
  var value = -3.4028234e38;
  var index = NONE;
  if (FINAL) {
    for (var p = lid; p < PARTIALS; p += WORKGROUP_SIZE) {
      let v = bitcast<f32>(partials[2u * p]);
      let i = partials[2u * p + 1u];
      if (before(v, i, value, index)) {
        value = v;
        index = i;
      }
    }
  } else {
    let chunk = (params.count + PARTIALS - 1u) / PARTIALS;
    let end = min(wid.x * chunk + chunk, params.count);
    for (var i = wid.x * chunk + lid; i < end; i += WORKGROUP_SIZE) {
      let v = logits[i];
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
    next_ids[0] = winner;
    history[params.slot] = winner;
  } else {
    partials[2u * wid.x] = bitcast<u32>(best_value[0]);
    partials[2u * wid.x + 1u] = best_index[0];
  }
}
