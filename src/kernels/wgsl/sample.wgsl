// Top-k sampling on the GPU: a token drawn from the logits at temperature 1 / inv_temperature among the top_k
// best (1..MAX_TOP_K), cut further by top-p and min-p, written to next_ids[0] — the input of the next decode
// step, so that sampled decoding, like greedy decoding, never waits for the host between steps — and to
// history[slot], for the host to read back. Candidates, order and cuts are generate/sampler.cpp's: higher
// logit first, lower index first among equal logits, NaN never drawn; probabilities over the top_k; top-p
// keeps the shortest prefix whose probability reaches top_p; min-p drops tokens below min_p times the best's
// probability. The random number is a hash of (seed, position): the same seed gives the same tokens.
// Two dispatches of this shader:
// * FINAL false: PARTIALS = ceil(count / CHUNK) workgroups each sort one chunk of CHUNK logits in workgroup
//   memory (a bitonic sort) and store its MAX_TOP_K best as (value bits, index) pairs in
//   candidates[2 (w MAX_TOP_K + r)], index NONE past the chunk's valid logits. The top_k best of all are
//   among these, since each is among its own chunk's best.
// * FINAL true: one workgroup merges the PARTIALS sorted lists head by head until it has top_k tokens, then
//   its first invocation applies the cuts and draws.
// Bindings (group 0): 0 logits [count] read, 1 next_ids [>= 1] u32 read_write, 2 history [> slot] u32
//                     read_write, 3 candidates [2 * PARTIALS * MAX_TOP_K] u32 read_write, 4 params uniform.
// Dispatch: (PARTIALS, 1, 1) with FINAL false, then (1, 1, 1) with FINAL true; PARTIALS <= 256.
struct Params {
  count: u32,
  slot: u32,
  top_k: u32,            // 1..MAX_TOP_K
  position: u32,         // of the step: with the seed, picks the random number
  top_p: f32,            // (0, 1]; 1 keeps all top_k
  min_p: f32,            // [0, 1]; 0 keeps all
  inv_temperature: f32,  // > 0
  seed_lo: u32,
  seed_hi: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> next_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> history: array<u32>;
@group(0) @binding(3) var<storage, read_write> candidates: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

override FINAL: bool = false;
override PARTIALS: u32 = 1u;  // ceil(count / CHUNK), set by the dispatcher
const WORKGROUP_SIZE: u32 = 256u;
const CHUNK: u32 = 1024u;     // logits per chunk: 4 per invocation
const MAX_TOP_K: u32 = 64u;   // kernels/model.h kMaxSampleTopK
const NONE: u32 = 0xFFFFFFFFu;
var<workgroup> values: array<f32, CHUNK>;
var<workgroup> indices: array<u32, CHUNK>;
var<workgroup> top_values: array<f32, MAX_TOP_K>;
var<workgroup> top_indices: array<u32, MAX_TOP_K>;

// Whether candidate (v, i) comes before (w, j): any index before none; else larger value, or equal value and
// lower index.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
  return i != NONE && (j == NONE || v > w || (v == w && i < j));
}

// Swaps slots a < b of the workgroup arrays when b's candidate must come first.
fn order_pair(a: u32, b: u32) {
  if (before(values[b], indices[b], values[a], indices[a])) {
    let v = values[a];
    let i = indices[a];
    values[a] = values[b];
    indices[a] = indices[b];
    values[b] = v;
    indices[b] = i;
  }
}

// Sorts values / indices[0, CHUNK) into sampling order: a bitonic network, each invocation ordering 2 of its
// CHUNK / 2 pairs per stage. Called in uniform control flow (it has barriers).
fn sort_chunk(lid: u32) {
  for (var size = 2u; size <= CHUNK; size *= 2u) {
    for (var stride = size / 2u; stride > 0u; stride /= 2u) {
      for (var p = lid; p < CHUNK / 2u; p += WORKGROUP_SIZE) {
        // Pair p: slot a (bit `stride` clear) and a + stride; runs of `size` alternate direction.
        let a = 2u * p - (p & (stride - 1u));
        let b = a + stride;
        if ((a & size) == 0u) {
          order_pair(a, b);
        } else {
          order_pair(b, a);
        }
      }
      workgroupBarrier();
    }
  }
}

fn chunk_top(wid: u32, lid: u32) {
  for (var s = lid; s < CHUNK; s += WORKGROUP_SIZE) {
    let i = wid * CHUNK + s;
    var v = 0.0;
    var index = NONE;
    if (i < params.count) {
      v = logits[i];
      index = select(NONE, i, v == v);  // v == v is false for NaN
    }
    values[s] = v;
    indices[s] = index;
  }
  workgroupBarrier();
  sort_chunk(lid);
  for (var r = lid; r < MAX_TOP_K; r += WORKGROUP_SIZE) {
    candidates[2u * (wid * MAX_TOP_K + r)] = bitcast<u32>(values[r]);
    candidates[2u * (wid * MAX_TOP_K + r) + 1u] = indices[r];
  }
}

// A 32-bit integer hash (Chris Wellons' lowbias32): the random bits of the draw.
fn mix(x: u32) -> u32 {
  var z = x;
  z ^= z >> 16u;
  z *= 0x7feb352du;
  z ^= z >> 15u;
  z *= 0x846ca68bu;
  z ^= z >> 16u;
  return z;
}

// The top_k best of all chunks into top_values / top_indices, merged head by head: invocation p < PARTIALS
// offers the next candidate of chunk p, the workgroup keeps the best offer. Returns how many are valid (fewer
// than top_k when fewer logits are not NaN). Called in uniform control flow.
fn merge_top_k(lid: u32) -> u32 {
  let k = min(params.top_k, MAX_TOP_K);
  var head = 0u;
  var found = 0u;
  for (var r = 0u; r < k; r++) {
    var v = 0.0;
    var index = NONE;
    if (lid < PARTIALS && head < MAX_TOP_K) {
      v = bitcast<f32>(candidates[2u * (lid * MAX_TOP_K + head)]);
      index = candidates[2u * (lid * MAX_TOP_K + head) + 1u];
    }
    values[lid] = v;
    indices[lid] = index;
    workgroupBarrier();
    for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
      if (lid < stride) {
        order_pair(lid, lid + stride);
      }
      workgroupBarrier();
    }
    let winner = indices[0];
    if (winner != NONE && winner == index) {
      head++;  // this invocation's offer won: its chunk's next candidate is offered next round
    }
    if (lid == 0u) {
      top_values[r] = values[0];
      top_indices[r] = winner;
    }
    if (winner != NONE) {
      found++;
    }
    workgroupBarrier();  // values[0] is read by all before the next round overwrites it
  }
  return found;
}

// The cuts and the draw over the n best in top_values / top_indices (the host sampler's loop, in f32).
fn draw(n: u32) -> u32 {
  if (n == 0u) {
    return 0u;  // every logit NaN: token 0, as the GPU argmax
  }
  let best = top_values[0];
  var total = 0.0;
  for (var i = 0u; i < n; i++) {
    total += exp((top_values[i] - best) * params.inv_temperature);
  }
  var cut = n;
  var kept = total;
  if (params.top_p < 1.0 || params.min_p > 0.0) {
    var cumulative = 0.0;
    kept = 0.0;
    for (cut = 0u; cut < n; cut++) {
      let w = exp((top_values[cut] - best) * params.inv_temperature);
      if (cut > 0u && w < params.min_p) {  // p < min_p * p(best), p(best) = 1 / total
        break;
      }
      cumulative += w / total;
      kept += w;
      if (cumulative >= params.top_p) {
        cut++;
        break;
      }
    }
  }
  let bits = mix(params.seed_lo ^ mix(params.seed_hi ^ mix(params.position)));
  var r = f32(bits >> 8u) * (1.0 / 16777216.0) * kept;  // uniform in [0, kept)
  for (var i = 0u; i < cut; i++) {
    r -= exp((top_values[i] - best) * params.inv_temperature);
    if (r <= 0.0) {
      return top_indices[i];
    }
  }
  return top_indices[cut - 1u];
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (!FINAL) {
    chunk_top(wid.x, lid);
    return;
  }
  let n = merge_top_k(lid);
  if (lid == 0u) {
    let token = draw(n);
    next_ids[0] = token;
    history[params.slot] = token;
  }
}
