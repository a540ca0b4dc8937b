// Sampling on the GPU: a token drawn from the logits at temperature 1 / inv_temperature among the top_k best
// (1..MAX_TOP_K, or 0: all), cut further by top-p and min-p, written to next_ids[0] — the input of the next decode
// step, so that sampled decoding, like greedy decoding, never waits for the host between steps — and to
// history[slot], for the host to read back. Candidates, order and cuts are generate/sampler.cpp's: higher
// logit first, lower index first among equal logits, NaN never drawn, infinities clamped to the largest
// finite floats (+inf: certain, -inf: drawn only if every logit is); probabilities over the top_k; top-p
// keeps the shortest prefix whose probability reaches top_p; min-p drops tokens below min_p times the best's
// probability. The random number is a hash of (seed, position): the same seed gives the same tokens. Every
// logit NaN: NONE = 0xFFFFFFFF instead of a token. Penalties first, as the host sampler's: a token seen
// counts[i] > 0 times has its logit divided (if positive) or multiplied by repetition_penalty, then lowered
// by presence_penalty + frequency_penalty * counts[i]; the drawn token's count goes up by one, so that the
// next step sees it.
// Two dispatches of this shader:
// * FINAL false: PARTIALS = ceil(count / CHUNK) workgroups each sort one chunk of CHUNK logits in workgroup
//   memory (a bitonic sort) and store its MAX_TOP_K best as (value bits, index) pairs in
//   candidates[2 (w MAX_TOP_K + r)], index NONE past the chunk's valid logits, and its largest logit and sum
//   of exp((logit - largest) / temperature) in candidates[2 (PARTIALS MAX_TOP_K + w) + 0, 1]. The MAX_TOP_K
//   best of all are among these lists, since each is among its own chunk's best.
// * FINAL true: one workgroup merges the PARTIALS sorted lists head by head into the best min(top_k,
//   MAX_TOP_K) (MAX_TOP_K for top_k 0), and its first invocation applies the cuts and draws among them. With
//   top_k 0 the probabilities are over all tokens (the chunks' sums), and the cuts may reach past the
//   MAX_TOP_K best; then the whole workgroup draws by rejection over all logits instead (see draw_all).
// Bindings (group 0): 0 logits [count] read, 1 next_ids [>= 1] u32 read_write, 2 history [> slot] u32
//                     read_write, 3 candidates [2 * PARTIALS * (MAX_TOP_K + 1)] u32 read_write, 4 counts
//                     [count] u32 read_write, 5 params uniform.
// Dispatch: (PARTIALS, 1, 1) with FINAL false, then (1, 1, 1) with FINAL true; PARTIALS <= 256.
//!include token_order.wgsl

struct Params {
  count: u32,
  slot: u32,
  top_k: u32,            // 0 (off) or 1..MAX_TOP_K
  position: u32,         // of the step: with the seed, picks the random number
  top_p: f32,            // (0, 1]; 1 keeps all top_k
  min_p: f32,            // [0, 1]; 0 keeps all
  inv_temperature: f32,  // > 0
  seed_lo: u32,
  seed_hi: u32,
  repetition_penalty: f32,  // > 0; 1: off
  presence_penalty: f32,    // 0: off
  frequency_penalty: f32,   // 0: off
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> next_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> history: array<u32>;
@group(0) @binding(3) var<storage, read_write> candidates: array<u32>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

override FINAL: bool = false;
override PARTIALS: u32 = 1u;  // ceil(count / CHUNK), set by the dispatcher
const WORKGROUP_SIZE: u32 = 256u;
const CHUNK: u32 = 1024u;     // logits per chunk: 4 per invocation
const MAX_TOP_K: u32 = 64u;   // kernels/model.h kMaxSampleTopK
var<workgroup> values: array<f32, CHUNK>;
var<workgroup> indices: array<u32, CHUNK>;
var<workgroup> top_values: array<f32, MAX_TOP_K>;
var<workgroup> top_indices: array<u32, MAX_TOP_K>;
var<workgroup> sums: array<f32, WORKGROUP_SIZE>;  // reductions and the prefix sums of draw_all
var<workgroup> decision: u32;                     // the token drawn, shared with the whole workgroup
var<workgroup> decision_logit: f32;               // draw_all: its logit (counts are read_write: not uniform)
const UNDECIDED: u32 = 0xFFFFFFFEu;               // draw_top: the cuts reach past the MAX_TOP_K best
const LARGEST: f32 = 0x1.fffffep+127f;              // the largest finite f32
const MAX_ROUNDS: u32 = 256u;                     // draw_all's safety bound (see there)

// Logit i (not NaN) after the penalties, with infinities clamped to +-LARGEST, so that every weight below
// is finite.
fn logit(i: u32) -> f32 {
  var v = logits[i];
  let seen = counts[i];
  if (seen > 0u) {
    v = select(v * params.repetition_penalty, v / params.repetition_penalty, v > 0.0);
    v -= params.presence_penalty + params.frequency_penalty * f32(seen);
  }
  return clamp(v, -LARGEST, LARGEST);
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
    if (i < params.count && !is_nan(logits[i])) {
      v = logit(i);
      index = i;
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
  // The chunk's largest logit (the first after the sort) and its sum of weights relative to it; a chunk of
  // NaN only has weight 0 (and the smallest largest logit, so the product in total_weight stays 0).
  let largest = select(values[0], -LARGEST, indices[0] == NONE);
  var sum = 0.0;
  for (var s = lid; s < CHUNK; s += WORKGROUP_SIZE) {
    if (indices[s] != NONE) {
      sum += weight(values[s], largest);
    }
  }
  let total = workgroup_sum(lid, sum);
  if (lid == 0u) {
    let stats = 2u * (PARTIALS * MAX_TOP_K + wid);
    candidates[stats] = bitcast<u32>(largest);
    candidates[stats + 1u] = bitcast<u32>(total);
  }
}

// The weight of a logit relative to a larger one (the best's is 1): exp((v - best) / temperature), in [0, 1]
// for finite logits (v - best may round to -inf: weight 0).
fn weight(v: f32, best: f32) -> f32 {
  return exp((v - best) * params.inv_temperature);
}

// The sum of every invocation's `value`, returned to all. Called in uniform control flow.
fn workgroup_sum(lid: u32, value: f32) -> f32 {
  sums[lid] = value;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      sums[lid] += sums[lid + stride];
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&sums[0]);
}

// A 32-bit integer hash (Chris Wellons' lowbias32): the random bits of the draws.
fn mix(x: u32) -> u32 {
  var z = x;
  z ^= z >> 16u;
  z *= 0x7feb352du;
  z ^= z >> 15u;
  z *= 0x846ca68bu;
  z ^= z >> 16u;
  return z;
}

// A uniform number in [0, 1) for draw `round` of this step (0: draw_top; 1, 2, ...: draw_all's rounds).
fn random_unit(round: u32) -> f32 {
  let bits = mix(params.seed_lo ^ mix(params.seed_hi ^ mix(params.position ^ mix(round))));
  return f32(bits >> 8u) * (1.0 / 16777216.0);
}

// The best min(top_k, MAX_TOP_K) of all chunks (MAX_TOP_K for top_k 0) into top_values / top_indices, merged
// head by head: invocation p < PARTIALS
// offers the next candidate of chunk p, the workgroup keeps the best offer. Returns how many are valid (fewer
// than top_k when fewer logits are not NaN). Called in uniform control flow.
fn merge_top_k(lid: u32) -> u32 {
  let k = select(min(params.top_k, MAX_TOP_K), MAX_TOP_K, params.top_k == 0u);
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

// The sum of weights over all tokens (top_k 0), from the chunks' sums relative to their own largest logits.
// Called in uniform control flow.
fn total_weight(lid: u32, best: f32) -> f32 {
  var part = 0.0;
  if (lid < PARTIALS) {
    let stats = 2u * (PARTIALS * MAX_TOP_K + lid);
    part = bitcast<f32>(candidates[stats + 1u]) * weight(bitcast<f32>(candidates[stats]), best);
  }
  return workgroup_sum(lid, part);
}

// The cuts and the draw over the n best in top_values / top_indices (the host sampler's loop, in f32), the
// probabilities relative to `total`; UNDECIDED when the cuts reach past them (top_k 0 with more tokens).
fn draw_top(n: u32, total: f32) -> u32 {
  if (n == 0u) {
    return NONE;  // every logit NaN: no token (the host stops on it), as the GPU argmax
  }
  let best = top_values[0];
  var cut = n;
  var kept = total;
  if (params.top_p < 1.0 || params.min_p > 0.0) {
    var cumulative = 0.0;
    kept = 0.0;
    var decided = false;
    for (cut = 0u; cut < n; cut++) {
      let w = weight(top_values[cut], best);
      if (cut > 0u && w < params.min_p) {  // p < min_p * p(best), p(best) = 1 / total
        decided = true;
        break;
      }
      cumulative += w / total;
      kept += w;
      if (cumulative >= params.top_p) {
        cut++;
        decided = true;
        break;
      }
    }
    if (!decided && params.top_k == 0u && n == MAX_TOP_K) {
      return UNDECIDED;  // the kept tokens may go on past the MAX_TOP_K best
    }
  } else if (params.top_k == 0u && n == MAX_TOP_K) {
    return UNDECIDED;  // every token is kept
  }
  var r = random_unit(0u) * kept;  // in [0, kept)
  for (var i = 0u; i < cut; i++) {
    r -= weight(top_values[i], best);
    if (r <= 0.0) {
      return top_indices[i];
    }
  }
  return top_indices[cut - 1u];
}

// The draw over all `count` logits with top_k 0 when the cuts reach past the MAX_TOP_K best, by rejection:
// draw j from the tokens before a pivot (at first all) in proportion to their weights; j is kept when the
// probability of the tokens before it is below top_p and its own weight reaches min_p (or it is the best);
// else the pivot moves to j, which removes j and every token after it, and the next round draws again. The
// kept tokens lie before every pivot, so the token accepted is drawn from them in proportion to its weight;
// each round removes at least one token, and the best is always kept, so the loop ends. Each round removes
// in expectation a good share of the eligible weight, so MAX_ROUNDS rounds are not reached in practice;
// should they be, the best token is taken (it is always kept), rather than risk a long stall. Each invocation
// covers a contiguous range of indices, so the draw's prefix sums run in index order. Called in uniform
// control flow; returns the token to all invocations.
fn draw_all(lid: u32, best: f32) -> u32 {
  // (main's total is not provably uniform to the compiler; this sum, ending in workgroupUniformLoad, is.)
  let total = total_weight(lid, best);
  let span = (params.count + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
  let first = min(lid * span, params.count);
  let end = min(first + span, params.count);
  var pivot_value = 0.0;
  var pivot = NONE;
  for (var round = 1u; round <= MAX_ROUNDS; round++) {
    // This invocation's weight of the tokens before the pivot, and the inclusive prefix sums of those.
    var mass = 0.0;
    for (var i = first; i < end; i++) {
      let v = logit(i);
      if (!is_nan(logits[i]) && before(v, i, pivot_value, pivot)) {
        mass += weight(v, best);
      }
    }
    sums[lid] = mass;
    workgroupBarrier();
    for (var offset = 1u; offset < WORKGROUP_SIZE; offset *= 2u) {
      let earlier = select(0.0, sums[max(lid, offset) - offset], lid >= offset);
      workgroupBarrier();
      sums[lid] += earlier;
      workgroupBarrier();
    }
    let eligible = workgroupUniformLoad(&sums[WORKGROUP_SIZE - 1u]);
    var mark = random_unit(round) * eligible;
    if (mark >= eligible) {
      mark = 0.0;  // u * eligible rounded up to eligible
    }
    // The invocation whose range of the prefix sums holds the mark finds the token. (Should rounding leave
    // the mark in no range, the best token is taken: it is always kept.)
    if (lid == 0u) {
      decision = NONE;
    }
    workgroupBarrier();
    let below = select(0.0, sums[max(lid, 1u) - 1u], lid > 0u);
    if (mark >= below && mark < sums[lid]) {
      var r = mark - below;
      var chosen = NONE;
      for (var i = first; i < end; i++) {
        let v = logit(i);
        if (!is_nan(logits[i]) && before(v, i, pivot_value, pivot)) {
          chosen = i;  // the last eligible one if rounding runs past the end
          r -= weight(v, best);
          if (r < 0.0) {
            break;
          }
        }
      }
      decision = chosen;
    }
    var j = workgroupUniformLoad(&decision);
    if (j == NONE) {
      j = workgroupUniformLoad(&top_indices[0]);
    }
    if (lid == 0u) {
      decision_logit = logit(j);
    }
    let j_value = workgroupUniformLoad(&decision_logit);
    var above = 0.0;
    for (var i = first; i < end; i++) {
      let v = logit(i);
      if (!is_nan(logits[i]) && before(v, i, j_value, j)) {
        above += weight(v, best);
      }
    }
    let before_j = workgroup_sum(lid, above);
    let kept_by_p = params.top_p >= 1.0 || before_j / total < params.top_p;
    let kept_by_min_p = before_j == 0.0 || weight(j_value, best) >= params.min_p;
    if (kept_by_p && kept_by_min_p) {
      return j;
    }
    pivot_value = j_value;
    pivot = j;
  }
  return top_indices[0];
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (!FINAL) {
    chunk_top(wid.x, lid);
    return;
  }
  let n = merge_top_k(lid);
  let best = workgroupUniformLoad(&top_values[0]);
  var total = 0.0;
  if (params.top_k == 0u) {
    total = total_weight(lid, best);
  } else {
    for (var i = 0u; i < n; i++) {
      total += weight(top_values[i], best);
    }
  }
  if (lid == 0u) {
    decision = draw_top(n, total);
  }
  var token = workgroupUniformLoad(&decision);
  if (token == UNDECIDED) {
    token = draw_all(lid, best);
  }
  if (lid == 0u) {
    next_ids[0] = token;
    history[params.slot] = token;
    if (token < params.count) {
      counts[token] += 1u;
    }
  }
}
