// Greedy sampling on the GPU: the index of the largest of `count` logits (the lowest index on ties, like
// torch.argmax; NaN never wins), written to next_ids[0] — the input of the next decode step, so the token
// never has to visit the host before the next step runs — and to history[slot], for the host to read back.
// Bindings (group 0): 0 logits [count] read, 1 next_ids [>= 1] u32 read_write, 2 history [> slot] u32
//                     read_write, 3 params uniform.
// Dispatch: (1, 1, 1): one workgroup of 256 threads strides over the logits, then a tree reduction.
struct Params {
  count: u32,
  slot: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> next_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> history: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
var<workgroup> best_value: array<f32, WORKGROUP_SIZE>;
var<workgroup> best_index: array<u32, WORKGROUP_SIZE>;

// Whether (v, i) beats (w, j): larger value, or equal value and lower index.
fn beats(v: f32, i: u32, w: f32, j: u32) -> bool {
  return v > w || (v == w && i < j);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(local_invocation_index) lid: u32) {
  var value = -3.4028234e38;
  var index = 0xFFFFFFFFu;
  for (var i = lid; i < params.count; i += WORKGROUP_SIZE) {
    let v = logits[i];
    // v == v is false for NaN. Each thread visits increasing indices, so `>` keeps the first maximum.
    if (v == v && (v > value || index == 0xFFFFFFFFu)) {
      value = v;
      index = i;
    }
  }
  best_value[lid] = value;
  best_index[lid] = index;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      let v = best_value[lid + stride];
      let i = best_index[lid + stride];
      if (i != 0xFFFFFFFFu && (best_index[lid] == 0xFFFFFFFFu || beats(v, i, best_value[lid], best_index[lid]))) {
        best_value[lid] = v;
        best_index[lid] = i;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let winner = select(best_index[0], 0u, best_index[0] == 0xFFFFFFFFu);  // all NaN: token 0
    next_ids[0] = winner;
    history[params.slot] = winner;
  }
}
