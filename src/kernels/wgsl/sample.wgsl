// Sampling on the GPU: a token drawn from the logits at temperature 1 / inv_temperature, cut by top-k (any k; 0:
// off), top-p and min-p, written to next_ids[0] — the input of the next decode step, so that sampled decoding, like
// greedy decoding, never waits for the host between steps — and to history[slot], for the host to read back.
// The rule is generate/sampler.cpp's, which draws the same token (kernels::sample_unit's hash, the same integer
// arithmetic): candidates in sampling order (higher logit first, lower index first among equal logits; NaN never
// drawn; infinities clamped to the largest finite floats). Each has the integer weight
//   weight = floor(exp(-d) 2^31), d = (best - logit) / temperature, 0 from bin ZERO_BIN on (d >= ~21.3),
// so the best weighs 2^31 and every sum is exact and independent of the order it is taken in. top-k keeps the k
// first; top-p the shortest prefix of those whose weight reaches ceil(top_p 2^24 (their total) / 2^24); min-p the
// tokens whose weight reaches floor(min_p 2^31). The token drawn is the one at mark = floor(u (kept total)), u a
// 24-bit uniform hashed from (seed, position), among the kept tokens in index order (no sort of the kept set).
// Penalties first, as the host sampler's: a token seen counts[i] > 0 times has its logit divided (if positive) or
// multiplied by repetition_penalty, then lowered by presence_penalty + frequency_penalty * counts[i]; the drawn
// token's count goes up by one. Every logit NaN: NONE = 0xFFFFFFFF instead of a token.
// Four dispatches of this shader (STAGE), the first three over PARTIALS = ceil(count / CHUNK) workgroups:
// 0 each chunk's largest logit (its order key) into CHUNK_BEST; zeroes the histogram.
// 1 a histogram of every token's d in BINS bins of 1 / BIN_SCALE nats (counts and weight sums), from each
//   workgroup's own in workgroup memory.
// 2 every workgroup finds from the histogram the bins [lo, hi] the cut lies in (select_range); gathers the tokens
//   in them (at most CAPACITY) into GATHERED and sums its chunk's kept weight before them into CHUNK_KEPT.
// 3 one workgroup sorts the gathered tokens and finds the cut among them — or, with more than CAPACITY (ties,
//   very flat rows), narrows it down by radix passes over all logits — then draws: the chunk that holds the
//   mark from the chunks' kept sums, and the token within it.
// Bindings (group 0): 0 logits [count] read, 1 next_ids [>= 1] u32, 2 history [> slot] u32, 3 scratch
//                     [sample_candidates_words(count)] u32, 4 counts [count] u32, 5 params uniform.
//!include token_order.wgsl

struct Params {
  count: u32,
  slot: u32,
  top_k: u32,            // 0: off
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
@group(0) @binding(3) var<storage, read_write> scratch: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

override STAGE: u32 = 0u;
override PARTIALS: u32 = 1u;       // ceil(count / CHUNK), <= WORKGROUP_SIZE; set by the dispatcher
const WORKGROUP_SIZE: u32 = 256u;
const CHUNK: u32 = 2048u;          // kernels/model.h kSampleChunk
const BINS: u32 = 2048u;
const BINS_EACH: u32 = BINS / WORKGROUP_SIZE;
const ZERO_BIN: u32 = BINS - 1u;   // d beyond the others: weight 0
const BIN_SCALE: f32 = 96.0;       // bins per nat
const CAPACITY: u32 = 1024u;       // kernels/model.h kSampleGathered
const ONE: f32 = 2147483648.0;     // the best's weight, 2^31
const LARGEST: f32 = 0x1.fffffep+127f;
const NO_CUT_KEY: u32 = 0u;        // with index NONE: a cut after every token (order keys of tokens are > 0)
// scratch, in words
const HIST: u32 = 0u;                          // [BINS][count, weight low, weight high]
const GATHERED_COUNT: u32 = 3u * BINS;
const STATE: u32 = GATHERED_COUNT + 1u;        // select_range's result, written by workgroup 0 of stage 2
const GATHERED: u32 = STATE + 16u;             // [CAPACITY][order key, index]
const CHUNK_BEST: u32 = GATHERED + 2u * CAPACITY;
override CHUNK_KEPT: u32 = CHUNK_BEST + PARTIALS;  // [PARTIALS][weight low, high]

var<workgroup> bin_low: array<atomic<u32>, BINS>;     // stage 1: weight's low word; stage 3: radix histograms
var<workgroup> bin_packed: array<atomic<u32>, BINS>;  // stage 1: count + weight's high word << 16
var<workgroup> cand_key: array<u32, CAPACITY>;
var<workgroup> cand_index: array<u32, CAPACITY>;
var<workgroup> scan_count: array<u32, WORKGROUP_SIZE>;
var<workgroup> scan_low: array<u32, WORKGROUP_SIZE>;
var<workgroup> scan_high: array<u32, WORKGROUP_SIZE>;
var<workgroup> chunk_low: array<atomic<u32>, WORKGROUP_SIZE>;
var<workgroup> chunk_high: array<atomic<u32>, WORKGROUP_SIZE>;
var<workgroup> shared_u32: array<u32, 8>;  // a result found by one invocation, for all
var<workgroup> state_words: array<u32, 16>;  // stage 3: STATE

// ---- 64-bit unsigned arithmetic on vec2<u32> (low, high) ----
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let low = a.x + b.x;
  return vec2<u32>(low, a.y + b.y + select(0u, 1u, low < a.x));
}
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}
fn less64(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.y < b.y || (a.y == b.y && a.x < b.x);
}
fn wide(a: u32) -> vec2<u32> {
  return vec2<u32>(a, 0u);
}
fn mul32(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xFFFFu;
  let a1 = a >> 16u;
  let b0 = b & 0xFFFFu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let middle = p01 + a1 * b0;
  let middle_carry = select(0u, 0x10000u, middle < p01);
  let low = p00 + (middle << 16u);
  return vec2<u32>(low, a1 * b1 + (middle >> 16u) + middle_carry + select(0u, 1u, low < p00));
}
// a m / 2^24, rounded down or (up) up; m <= 2^24, a < 2^56.
fn scale24(a: vec2<u32>, m: u32, up: bool) -> vec2<u32> {
  let p0 = mul32(a.x, m);
  let p1 = mul32(a.y, m);
  let w1 = p0.y + p1.x;
  let w2 = p1.y + select(0u, 1u, w1 < p0.y);
  let r = vec2<u32>((p0.x >> 24u) | (w1 << 8u), (w1 >> 24u) | (w2 << 8u));
  return select(r, add64(r, wide(1u)), up && (p0.x & 0xFFFFFFu) != 0u);
}

// ---- tokens ----
fn valid(i: u32) -> bool {
  return i < params.count && !is_nan(logits[i]);
}

// Logit i (not NaN) after the penalties, infinities clamped to +-LARGEST.
fn logit(i: u32) -> f32 {
  var v = logits[i];
  let seen = counts[i];
  if (seen > 0u) {
    v = select(v * params.repetition_penalty, v / params.repetition_penalty, v > 0.0);
    v -= params.presence_penalty + params.frequency_penalty * f32(seen);
  }
  return clamp(v, -LARGEST, LARGEST);
}

// A u32 that orders as the value does (-0 as +0); every finite value's is > 0.
fn order_key(v: f32) -> u32 {
  var bits = bitcast<u32>(v);
  if (bits == 0x80000000u) {
    bits = 0u;
  }
  return select(bits ^ 0x80000000u, ~bits, (bits & 0x80000000u) != 0u);
}
fn key_value(key: u32) -> f32 {
  return bitcast<f32>(select(~key, key ^ 0x80000000u, (key & 0x80000000u) != 0u));
}

// Whether token (key a, index i) comes before (key b, index j) in sampling order, or is it.
fn at_or_before(a: u32, i: u32, b: u32, j: u32) -> bool {
  return a > b || (a == b && i <= j);
}

struct Weighed {
  bin: u32,
  weight: u32,
}
fn weigh(v: f32, best: f32) -> Weighed {
  let d = (best - v) * params.inv_temperature;
  let bin = u32(min(d * BIN_SCALE, f32(ZERO_BIN)));
  return Weighed(bin, select(u32(exp(-d) * ONE), 0u, bin == ZERO_BIN));
}

// The weight a kept token must reach: min-p's, and at least 1 (weight 0 is never drawn).
fn least_weight() -> u32 {
  return max(u32(params.min_p * ONE), 1u);
}
// top-p as a fraction of 2^24; 2^24: off.
fn top_p24() -> u32 {
  return min(u32(params.top_p * 16777216.0), 16777216u);
}

// ---- workgroup reductions and scans (called in uniform control flow) ----
fn max_all(lid: u32, value: u32) -> u32 {
  workgroupBarrier();  // the arrays' last readers are done
  scan_count[lid] = value;
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) {
      scan_count[lid] = max(scan_count[lid], scan_count[lid + stride]);
    }
    workgroupBarrier();
  }
  let result = workgroupUniformLoad(&scan_count[0]);
  return result;
}

// Inclusive scans of every invocation's (count, weight) into scan_count / scan_low / scan_high.
fn scan(lid: u32, count: u32, weight: vec2<u32>) {
  workgroupBarrier();  // the arrays' last readers are done
  scan_count[lid] = count;
  scan_low[lid] = weight.x;
  scan_high[lid] = weight.y;
  workgroupBarrier();
  for (var offset = 1u; offset < WORKGROUP_SIZE; offset *= 2u) {
    var c = 0u;
    var w = vec2<u32>(0u, 0u);
    if (lid >= offset) {
      c = scan_count[lid - offset];
      w = vec2<u32>(scan_low[lid - offset], scan_high[lid - offset]);
    }
    workgroupBarrier();
    scan_count[lid] += c;
    let sum = add64(vec2<u32>(scan_low[lid], scan_high[lid]), w);
    scan_low[lid] = sum.x;
    scan_high[lid] = sum.y;
    workgroupBarrier();
  }
}
fn scanned_weight(lid: u32) -> vec2<u32> {
  return vec2<u32>(scan_low[lid], scan_high[lid]);
}

// The best token's order key over all chunks (0: every logit NaN).
fn global_best(lid: u32) -> u32 {
  var best = 0u;
  if (lid < PARTIALS) {
    best = atomicLoad(&scratch[CHUNK_BEST + lid]);
  }
  return max_all(lid, best);
}

// ---- stage 0 ----
fn chunk_best(wid: u32, lid: u32) {
  var best = 0u;
  for (var s = lid; s < CHUNK; s += WORKGROUP_SIZE) {
    let i = wid * CHUNK + s;
    if (valid(i)) {
      best = max(best, order_key(logit(i)));
    }
  }
  let result = max_all(lid, best);
  if (lid == 0u) {
    atomicStore(&scratch[CHUNK_BEST + wid], result);
  }
  for (var j = wid * WORKGROUP_SIZE + lid; j < GATHERED; j += PARTIALS * WORKGROUP_SIZE) {
    atomicStore(&scratch[j], 0u);
  }
}

// ---- stage 1 ----
fn histogram(wid: u32, lid: u32) {
  let best_key = global_best(lid);
  if (best_key == 0u) {
    return;
  }
  let best = key_value(best_key);
  for (var b = lid; b < BINS; b += WORKGROUP_SIZE) {
    atomicStore(&bin_low[b], 0u);
    atomicStore(&bin_packed[b], 0u);
  }
  workgroupBarrier();
  for (var s = lid; s < CHUNK; s += WORKGROUP_SIZE) {
    let i = wid * CHUNK + s;
    if (valid(i)) {
      let t = weigh(logit(i), best);
      let old = atomicAdd(&bin_low[t.bin], t.weight);
      atomicAdd(&bin_packed[t.bin], 1u + select(0u, 0x10000u, old + t.weight < old));
    }
  }
  workgroupBarrier();
  for (var b = lid; b < BINS; b += WORKGROUP_SIZE) {
    let packed = atomicLoad(&bin_packed[b]);
    if (packed != 0u) {
      let low = atomicLoad(&bin_low[b]);
      atomicAdd(&scratch[HIST + 3u * b], packed & 0xFFFFu);
      let old = atomicAdd(&scratch[HIST + 3u * b + 1u], low);
      atomicAdd(&scratch[HIST + 3u * b + 2u], (packed >> 16u) + select(0u, 1u, old + low < old));
    }
  }
}

// ---- stage 2: the range of bins the cut lies in ----
struct Range {
  lo: u32,                  // the range's bins [lo, hi] (lo > hi: empty, no cut)
  hi: u32,
  count_before: u32,        // tokens in bins before lo
  weight_before: vec2<u32>,
  total: vec2<u32>,         // weight of all tokens
  nonzero: u32,             // tokens of weight > 0 (bins before ZERO_BIN)
  gathered: u32,            // tokens in [lo, hi]
}

fn bin_count(b: u32) -> u32 {
  return atomicLoad(&scratch[HIST + 3u * b]);
}
fn bin_weight(b: u32) -> vec2<u32> {
  return vec2<u32>(atomicLoad(&scratch[HIST + 3u * b + 1u]), atomicLoad(&scratch[HIST + 3u * b + 2u]));
}

// The first bin whose tokens, with those before, reach `goal` tokens (by_weight false) or weight (after scan()
// of the invocations' BINS_EACH bins, the zero bin left out): its index, its count, and the count and weight
// before it, the same in every invocation.
struct Found {
  bin: u32,
  count: u32,
  count_before: u32,
  weight_before: vec2<u32>,
}
fn find_bin(lid: u32, by_weight: bool, goal: vec2<u32>) -> Found {
  let through = select(wide(scan_count[lid]), scanned_weight(lid), by_weight);
  var before = vec2<u32>(0u, 0u);
  var count = 0u;
  var weight = vec2<u32>(0u, 0u);
  if (lid > 0u) {
    before = select(wide(scan_count[lid - 1u]), scanned_weight(lid - 1u), by_weight);
    count = scan_count[lid - 1u];
    weight = scanned_weight(lid - 1u);
  }
  if (!less64(through, goal) && (lid == 0u || less64(before, goal))) {
    for (var b = lid * BINS_EACH; b < (lid + 1u) * BINS_EACH && b < ZERO_BIN; b++) {
      let c = bin_count(b);
      let w = bin_weight(b);
      if (!less64(select(wide(count + c), add64(weight, w), by_weight), goal)) {
        shared_u32[0] = b;
        shared_u32[1] = c;
        shared_u32[2] = count;
        shared_u32[3] = weight.x;
        shared_u32[4] = weight.y;
        break;
      }
      count += c;
      weight = add64(weight, w);
    }
  }
  return Found(workgroupUniformLoad(&shared_u32[0]), workgroupUniformLoad(&shared_u32[1]),
               workgroupUniformLoad(&shared_u32[2]),
               vec2<u32>(workgroupUniformLoad(&shared_u32[3]), workgroupUniformLoad(&shared_u32[4])));
}

// From the histogram: with top-k on, the bin of the k-th token; with top-p, the bins its cut may lie in (its
// goal depends on the top-k total, not known to the bin); small top-k sets are gathered whole.
fn select_range(lid: u32) -> Range {
  var count = 0u;
  var weight = vec2<u32>(0u, 0u);
  for (var b = lid * BINS_EACH; b < (lid + 1u) * BINS_EACH && b < ZERO_BIN; b++) {
    count += bin_count(b);
    weight = add64(weight, bin_weight(b));
  }
  scan(lid, count, weight);
  var r: Range;
  r.nonzero = workgroupUniformLoad(&scan_count[WORKGROUP_SIZE - 1u]);
  r.total = vec2<u32>(workgroupUniformLoad(&scan_low[WORKGROUP_SIZE - 1u]), workgroupUniformLoad(&scan_high[WORKGROUP_SIZE - 1u]));
  r.lo = ZERO_BIN;
  r.hi = ZERO_BIN - 1u;
  r.count_before = r.nonzero;
  r.weight_before = r.total;
  let p = top_p24();
  if (params.top_k > 0u && params.top_k < r.nonzero) {
    let k = find_bin(lid, false, wide(params.top_k));
    r.hi = k.bin;
    let through = k.count_before + k.count;
    if (through <= CAPACITY) {
      r.lo = 0u;
      r.count_before = 0u;
      r.weight_before = vec2<u32>(0u, 0u);
    } else {
      var first = k;
      if (p < 16777216u) {  // the top-k total is at least the weight before its bin
        first = find_bin(lid, true, scale24(k.weight_before, p, true));
      }
      r.lo = first.bin;
      r.count_before = first.count_before;
      r.weight_before = first.weight_before;
    }
    r.gathered = through - r.count_before;
  } else if (p < 16777216u) {
    let first = find_bin(lid, true, scale24(r.total, p, true));
    r.lo = first.bin;
    r.hi = first.bin;
    r.count_before = first.count_before;
    r.weight_before = first.weight_before;
    r.gathered = first.count;
  }
  return r;
}

fn gather(wid: u32, lid: u32) {
  let best_key = global_best(lid);
  let r = select_range(lid);
  if (wid == 0u && lid == 0u) {
    atomicStore(&scratch[STATE], r.lo);
    atomicStore(&scratch[STATE + 1u], r.hi);
    atomicStore(&scratch[STATE + 2u], r.count_before);
    atomicStore(&scratch[STATE + 3u], r.weight_before.x);
    atomicStore(&scratch[STATE + 4u], r.weight_before.y);
    atomicStore(&scratch[STATE + 5u], r.total.x);
    atomicStore(&scratch[STATE + 6u], r.total.y);
    atomicStore(&scratch[STATE + 7u], r.gathered);
    atomicStore(&scratch[STATE + 8u], r.nonzero);
  }
  if (best_key == 0u) {
    return;
  }
  let best = key_value(best_key);
  let least = least_weight();
  var kept = vec2<u32>(0u, 0u);
  for (var s = lid; s < CHUNK; s += WORKGROUP_SIZE) {
    let i = wid * CHUNK + s;
    if (valid(i)) {
      let v = logit(i);
      let t = weigh(v, best);
      if (t.bin < r.lo && t.weight >= least) {
        kept = add64(kept, wide(t.weight));
      }
      if (t.bin >= r.lo && t.bin <= r.hi && r.gathered <= CAPACITY) {
        let slot = atomicAdd(&scratch[GATHERED_COUNT], 1u);
        atomicStore(&scratch[GATHERED + 2u * slot], order_key(v));
        atomicStore(&scratch[GATHERED + 2u * slot + 1u], i);
      }
    }
  }
  scan(lid, 0u, kept);
  if (lid == 0u) {
    atomicStore(&scratch[CHUNK_KEPT + 2u * wid], scan_low[WORKGROUP_SIZE - 1u]);
    atomicStore(&scratch[CHUNK_KEPT + 2u * wid + 1u], scan_high[WORKGROUP_SIZE - 1u]);
  }
}

// ---- stage 3: the cut ----
struct Cut {
  key: u32,    // the last kept token in sampling order (NO_CUT_KEY, NONE: none)
  index: u32,
}

// Whether gathered slot a's token comes before slot b's (NONE last).
fn comes_before(a: u32, b: u32) -> bool {
  let i = cand_index[a];
  let j = cand_index[b];
  return i != NONE && (j == NONE || cand_key[a] > cand_key[b] || (cand_key[a] == cand_key[b] && i < j));
}

// Sorts cand_key / cand_index[0, size) into sampling order (size a power of two): a bitonic network, runs of
// `run` alternating direction.
fn sort_gathered(lid: u32, size: u32) {
  for (var run = 2u; run <= size; run *= 2u) {
    for (var stride = run / 2u; stride > 0u; stride /= 2u) {
      for (var p = lid; p < size / 2u; p += WORKGROUP_SIZE) {
        let a = 2u * p - (p & (stride - 1u));
        let b = a + stride;
        if (select(comes_before(a, b), comes_before(b, a), (a & run) == 0u)) {
          let k = cand_key[a];
          let i = cand_index[a];
          cand_key[a] = cand_key[b];
          cand_index[a] = cand_index[b];
          cand_key[b] = k;
          cand_index[b] = i;
        }
      }
      workgroupBarrier();
    }
  }
}

const GATHERED_EACH: u32 = CAPACITY / WORKGROUP_SIZE;

// The sorted slot at which the count of tokens (by_weight false) or their weight, with those before the range
// (r), reaches `goal`, into shared_u32[4], and its weight with all before it into shared_u32[5, 6]; `n` slots.
fn find_slot(lid: u32, by_weight: bool, goal: vec2<u32>, r: Range, n: u32, best: f32) {
  var weight = vec2<u32>(0u, 0u);
  for (var s = lid * GATHERED_EACH; s < (lid + 1u) * GATHERED_EACH && s < n; s++) {
    weight = add64(weight, wide(weigh(key_value(cand_key[s]), best).weight));
  }
  scan(lid, 0u, weight);
  var through = r.weight_before;
  if (lid > 0u) {
    through = add64(through, scanned_weight(lid - 1u));
  }
  var position = r.count_before + lid * GATHERED_EACH;  // the tokens before slot s
  for (var s = lid * GATHERED_EACH; s < (lid + 1u) * GATHERED_EACH && s < n; s++) {
    let previous = select(wide(position), through, by_weight);
    through = add64(through, wide(weigh(key_value(cand_key[s]), best).weight));
    position++;
    let reached = select(wide(position), through, by_weight);
    if (!less64(reached, goal) && less64(previous, goal)) {
      shared_u32[4] = s;
      shared_u32[5] = through.x;
      shared_u32[6] = through.y;
    }
  }
  workgroupBarrier();
}

// The cut among the gathered tokens (at most CAPACITY).
fn cut_gathered(lid: u32, r: Range, best: f32) -> Cut {
  if (lid == 0u) {
    shared_u32[7] = min(atomicLoad(&scratch[GATHERED_COUNT]), CAPACITY);
  }
  let n = workgroupUniformLoad(&shared_u32[7]);
  var size = 1u;
  while (size < n) {
    size *= 2u;
  }
  for (var s = lid; s < size; s += WORKGROUP_SIZE) {
    cand_key[s] = select(0u, atomicLoad(&scratch[GATHERED + 2u * s]), s < n);
    cand_index[s] = select(NONE, atomicLoad(&scratch[GATHERED + 2u * s + 1u]), s < n);
  }
  workgroupBarrier();
  sort_gathered(lid, size);
  if (lid == 0u) {
    shared_u32[4] = n - 1u;
    shared_u32[5] = r.total.x;
    shared_u32[6] = r.total.y;
  }
  workgroupBarrier();
  let k_on = params.top_k > 0u && params.top_k < r.nonzero;
  if (k_on) {
    find_slot(lid, false, wide(params.top_k), r, n, best);
  }
  let k_slot = workgroupUniformLoad(&shared_u32[4]);
  let p = top_p24();
  if (p < 16777216u) {
    let total = vec2<u32>(workgroupUniformLoad(&shared_u32[5]), workgroupUniformLoad(&shared_u32[6]));
    find_slot(lid, true, scale24(total, p, true), r, n, best);
  }
  let slot = min(workgroupUniformLoad(&shared_u32[4]), k_slot);
  return Cut(cand_key[slot], cand_index[slot]);
}

// The token at which the count (by_weight false) or weight of the tokens in bins [lo, hi], in sampling order,
// from `before` on reaches `goal`, narrowed down 8 bits a sweep over all logits: the order key's 4 bytes, high
// first, then the index's 3 (< 2^19), low first. Into shared_u32[0, 1] (key, index), [2, 3, 4] (count, weight
// before it). Slow (7 passes of one workgroup over all logits): only for more than CAPACITY tokens in the range.
fn narrow(lid: u32, r: Range, by_weight: bool, goal: vec2<u32>, best: f32) {
  if (lid == 0u) {
    shared_u32[0] = 0u;
    shared_u32[1] = 0u;
    shared_u32[2] = r.count_before;
    shared_u32[3] = r.weight_before.x;
    shared_u32[4] = r.weight_before.y;
  }
  for (var sweep = 0u; sweep < 7u; sweep++) {
    let key_pass = sweep < 4u;
    let shift = select(16u - 8u * (sweep - 4u), 24u - 8u * sweep, key_pass);
    for (var b = lid; b < 3u * 256u; b += WORKGROUP_SIZE) {
      atomicStore(&bin_low[b], 0u);
    }
    let prefix_key = workgroupUniformLoad(&shared_u32[0]);
    let prefix_index = workgroupUniformLoad(&shared_u32[1]);
    for (var i = lid; i < params.count; i += WORKGROUP_SIZE) {
      if (!valid(i)) {
        continue;
      }
      let v = logit(i);
      let t = weigh(v, best);
      let key = order_key(v);
      var matches = t.bin >= r.lo && t.bin <= r.hi;
      if (key_pass && sweep > 0u) {
        matches = matches && (key >> (shift + 8u)) == (prefix_key >> (shift + 8u));
      } else if (!key_pass) {
        matches = matches && key == prefix_key && (sweep == 4u || (i >> (shift + 8u)) == (prefix_index >> (shift + 8u)));
      }
      if (matches) {
        let digit = (select(i, key, key_pass) >> shift) & 255u;
        atomicAdd(&bin_low[digit], 1u);
        let old = atomicAdd(&bin_low[256u + digit], t.weight);
        if (old + t.weight < old) {
          atomicAdd(&bin_low[512u + digit], 1u);
        }
      }
    }
    workgroupBarrier();
    if (lid == 0u) {
      var count = shared_u32[2];
      var weight = vec2<u32>(shared_u32[3], shared_u32[4]);
      for (var step = 0u; step < 256u; step++) {
        let digit = select(step, 255u - step, key_pass);  // the key's larger digits first, the index's smaller
        let c = atomicLoad(&bin_low[digit]);
        let w = vec2<u32>(atomicLoad(&bin_low[256u + digit]), atomicLoad(&bin_low[512u + digit]));
        let reached = select(wide(count + c), add64(weight, w), by_weight);
        if (c > 0u && !less64(reached, goal)) {
          if (key_pass) {
            shared_u32[0] = prefix_key | (digit << shift);
          } else {
            shared_u32[1] = prefix_index | (digit << shift);
          }
          break;
        }
        count += c;
        weight = add64(weight, w);
      }
      shared_u32[2] = count;
      shared_u32[3] = weight.x;
      shared_u32[4] = weight.y;
    }
    workgroupBarrier();
  }
}

fn cut_narrowed(lid: u32, r: Range, best: f32) -> Cut {
  var total = r.total;
  let k_on = params.top_k > 0u && params.top_k < r.nonzero;
  if (k_on) {
    narrow(lid, r, false, wide(params.top_k), best);
    let weight = vec2<u32>(workgroupUniformLoad(&shared_u32[3]), workgroupUniformLoad(&shared_u32[4]));
    total = add64(weight, wide(weigh(key_value(workgroupUniformLoad(&shared_u32[0])), best).weight));
  }
  let p = top_p24();
  if (p < 16777216u) {
    narrow(lid, r, true, scale24(total, p, true), best);
  }
  return Cut(workgroupUniformLoad(&shared_u32[0]), workgroupUniformLoad(&shared_u32[1]));
}

// ---- stage 3: the draw ----
fn kept_weight(i: u32, best: f32, cut: Cut, least: u32) -> u32 {
  if (!valid(i)) {
    return 0u;
  }
  let v = logit(i);
  let w = weigh(v, best).weight;
  return select(0u, w, w >= least && at_or_before(order_key(v), i, cut.key, cut.index));
}

// The kept token of [first, end) at `mark` (from_total: at floor(u total), the total of [first, end)), in index
// order: each invocation sums a contiguous share, the one whose share holds the mark walks it.
fn draw_span(lid: u32, first: u32, end: u32, mark_given: vec2<u32>, from_total: bool, best: f32, cut: Cut) -> u32 {
  let least = least_weight();
  let share = (end - first + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
  let start = first + lid * share;
  let stop = min(start + share, end);
  var sum = vec2<u32>(0u, 0u);
  for (var i = start; i < stop; i++) {
    sum = add64(sum, wide(kept_weight(i, best, cut, least)));
  }
  scan(lid, 0u, sum);
  let total = vec2<u32>(workgroupUniformLoad(&scan_low[WORKGROUP_SIZE - 1u]), scan_high[WORKGROUP_SIZE - 1u]);
  let mark = select(mark_given, scale24(total, random24(), false), from_total);
  if (lid == 0u) {
    shared_u32[7] = NONE;
  }
  workgroupBarrier();
  var below = vec2<u32>(0u, 0u);
  if (lid > 0u) {
    below = scanned_weight(lid - 1u);
  }
  if (!less64(mark, below) && less64(mark, scanned_weight(lid))) {
    var through = below;
    for (var i = start; i < stop; i++) {
      let w = kept_weight(i, best, cut, least);
      through = add64(through, wide(w));
      if (w > 0u && less64(mark, through)) {
        shared_u32[7] = i;
        break;
      }
    }
  }
  return workgroupUniformLoad(&shared_u32[7]);
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
// The 24 random bits of this step's draw (kernels::sample_unit's, sweep 0).
fn random24() -> u32 {
  return mix(params.seed_lo ^ mix(params.seed_hi ^ mix(params.position ^ mix(0u)))) >> 8u;
}

fn draw_gathered(lid: u32, r: Range, best: f32, cut: Cut) -> u32 {
  // The chunks' kept weight: before the range (stage 2), plus the gathered tokens kept.
  atomicStore(&chunk_low[lid], select(0u, atomicLoad(&scratch[CHUNK_KEPT + 2u * lid]), lid < PARTIALS));
  atomicStore(&chunk_high[lid], select(0u, atomicLoad(&scratch[CHUNK_KEPT + 2u * lid + 1u]), lid < PARTIALS));
  workgroupBarrier();
  let n = min(atomicLoad(&scratch[GATHERED_COUNT]), CAPACITY);
  let least = least_weight();
  for (var s = lid; s < n; s += WORKGROUP_SIZE) {
    let w = weigh(key_value(cand_key[s]), best).weight;
    if (w >= least && at_or_before(cand_key[s], cand_index[s], cut.key, cut.index)) {
      let chunk = cand_index[s] / CHUNK;
      let old = atomicAdd(&chunk_low[chunk], w);
      if (old + w < old) {
        atomicAdd(&chunk_high[chunk], 1u);
      }
    }
  }
  workgroupBarrier();
  let mine = vec2<u32>(atomicLoad(&chunk_low[lid]), atomicLoad(&chunk_high[lid]));
  scan(lid, 0u, mine);
  let total = vec2<u32>(workgroupUniformLoad(&scan_low[WORKGROUP_SIZE - 1u]), scan_high[WORKGROUP_SIZE - 1u]);
  let mark = scale24(total, random24(), false);
  let below = sub64(scanned_weight(lid), mine);
  if (lid == 0u) {
    shared_u32[0] = 0u;
  }
  workgroupBarrier();
  if (!less64(mark, below) && less64(mark, scanned_weight(lid))) {
    shared_u32[0] = lid;
    shared_u32[1] = below.x;
    shared_u32[2] = below.y;
  }
  workgroupBarrier();
  let chunk = workgroupUniformLoad(&shared_u32[0]);
  let before = vec2<u32>(shared_u32[1], shared_u32[2]);
  let chunk_mark = sub64(mark, before);
  workgroupBarrier();
  return draw_span(lid, chunk * CHUNK, min(chunk * CHUNK + CHUNK, params.count), chunk_mark, false, best, cut);
}

fn finish(lid: u32) {
  let best_key = global_best(lid);
  var token = NONE;
  if (best_key != 0u) {
    let best = key_value(best_key);
    if (lid < 16u) {
      state_words[lid] = atomicLoad(&scratch[STATE + lid]);
    }
    var r: Range;
    r.lo = workgroupUniformLoad(&state_words[0]);
    r.hi = workgroupUniformLoad(&state_words[1]);
    r.count_before = workgroupUniformLoad(&state_words[2]);
    r.weight_before = vec2<u32>(workgroupUniformLoad(&state_words[3]), workgroupUniformLoad(&state_words[4]));
    r.total = vec2<u32>(workgroupUniformLoad(&state_words[5]), workgroupUniformLoad(&state_words[6]));
    r.gathered = workgroupUniformLoad(&state_words[7]);
    r.nonzero = workgroupUniformLoad(&state_words[8]);
    if (r.lo > r.hi) {
      token = draw_gathered(lid, r, best, Cut(NO_CUT_KEY, NONE));
    } else if (r.gathered <= CAPACITY) {
      token = draw_gathered(lid, r, best, cut_gathered(lid, r, best));
    } else {
      token = draw_span(lid, 0u, params.count, vec2<u32>(0u, 0u), true, best, cut_narrowed(lid, r, best));
    }
  }
  if (lid == 0u) {
    next_ids[0] = token;
    history[params.slot] = token;
    if (token < params.count) {
      counts[token] += 1u;
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (STAGE == 0u) {
    chunk_best(wid.x, lid);
  } else if (STAGE == 1u) {
    histogram(wid.x, lid);
  } else if (STAGE == 2u) {
    gather(wid.x, lid);
  } else {
    finish(lid);
  }
}
