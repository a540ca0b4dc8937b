// Sampling on the GPU: a token drawn from the logits at temperature 1 / inv_temperature, cut by top-k (any k; 0:
// off), top-p and min-p, written to next_ids[slot] — the input of the next decode step, so that sampled decoding,
// like greedy decoding, never waits for the host between steps — and to history[slot], for the host to read back.
// Every dispatch serves all the rows of a step at once, one row of workgroups (workgroup_id.y) each: row r draws
// from logits[logits_offset .. logits_offset + count) with its own settings rows[r] (its seed, cuts, penalties,
// counts and slot), in its own share of the scratch. A batched step of 64 sequences is a dozen dispatches, not
// 64 dozen.
// The rule is generate/sampler.cpp's, which draws the same token (kernels::sample_unit's hash, the same integer
// arithmetic): candidates in sampling order (higher logit first, lower index first among equal logits; NaN never
// drawn; infinities clamped to the largest finite floats). Each has the integer weight
//   weight = floor(exp(-d) 2^31), d = (best - logit) / temperature, 0 from bin ZERO_BIN on (d >= ~21.3),
// so the best weighs 2^31 and every sum is exact and independent of the order it is taken in. top-k keeps the k
// first; top-p the shortest prefix of those whose weight reaches ceil(top_p 2^24 (their total) / 2^24); min-p the
// tokens whose weight reaches floor(min_p 2^31). The token drawn is the one at mark = floor(u (kept total)), u a
// 24-bit uniform hashed from (seed, position), among the kept tokens in index order (no sort of the kept set).
// Penalties first, as the host sampler's: the row's counts[i] is how often token i was generated, with bit 31 set where the
// prompt holds it (kernels::kSeenInPrompt). A token seen at all has its logit divided (if positive) or multiplied
// by repetition_penalty; one generated n > 0 times is then lowered by presence_penalty + frequency_penalty * n. The
// drawn token's count goes up by one where the row has penalties (a row without reads no counts, so a draw that is
// thrown away, such as a finished sequence's row in a step queued ahead, leaves them alone). Every logit NaN:
// NONE = 0xFFFFFFFF instead of a token.
//
// The cut is found in a window of tokens, contiguous in sampling order, narrowed down until it holds at most
// CAPACITY tokens, which one workgroup then sorts. Every step but that sort and the draw within one chunk runs on
// all PARTIALS = ceil(count / CHUNK) workgroups, so flat rows (thousands of tokens in the cut's bin, equal logits)
// cost a few more passes over the logits, each spread over the GPU, instead of one workgroup's sweeps. A token's
// place in sampling order is its 51-bit position (order key << 19 | (2^19 - 1 - index)): larger comes first.
// Dispatches of this shader (STAGE), all but the last over PARTIALS workgroups (a row of them):
// 0 each chunk's largest logit (its order key) into CHUNK_BEST; zeroes level 0's histogram and the levels' bounds.
// 1 the best key over the chunks into BEST; a histogram of every token's d in BINS bins of 1 / BIN_SCALE nats
//   (counts and weight sums), from each workgroup's own in workgroup memory.
// 2 level 0, 3 level L = 1 .. LEVELS - 1 (a dispatch each, of PARTIALS + L - 1 workgroups: see main()). Every
//   workgroup works out the same window from level L - 1's window and result (level 0: from the histogram of
//   stage 1); workgroup 0 stores it; the level's workgroups zero the next level's histogram. A level after the
//   gather returns at once, its window left as stage 0 zeroed it (mode FITS). Then by the window's mode:
//   FITS: gathers its tokens (at most CAPACITY) into GATHERED and sums each chunk's kept weight before the window
//   into CHUNK_KEPT (once: later levels keep the window); BOUNDS: the smallest and largest order key in the window
//   (a window of whole bins); REFINE: a histogram of the window's tokens in BINS sub-bins, aligned blocks of
//   2^shift positions, which the next level picks the cut's sub-bin from (11 bits of position a level). With
//   top-k and top-p together and too many tokens in range, the top-k cut is refined first, down to one order key
//   (all of whose tokens weigh the same: the top-k total follows), then top-p's cut from that total.
//   LEVELS covers the worst case (a bounds level and 3 refinements of 51 bits for the top-k cut's key, a bounds
//   level and 4 for top-p's cut, 11 bits each, then the gather); a level with nothing left to do returns at once.
//   Without a top-k or top-p cut, level 0 gathers an empty window at once: a step with such settings may leave
//   out levels 1 on; with one of them, a bounds level, 4 refinements and the gather are the most it takes, and it
//   may leave out levels 6 on (kernels::sample_levels).
// 4: one workgroup sorts the gathered tokens (the first gathering level's window), finds the cut among them,
//   then draws: the chunk that holds the mark from the chunks' kept sums, and the token within it.
// Bindings (group 0): 0 logits [each row's logits_offset + count] read, 1 next_ids [> each slot] u32, 2 history
//                     [> each slot] u32, 3 scratch [rows * sample_candidates_words(count)] u32, 4 counts [each
//                     row's counts_offset + count] u32, 5 rows [rows] Settings (kernels::SampleParams); no uniform.
//!include token_order.wgsl

struct Settings {
  count: u32,               // logits in the row, at most the dispatcher's count (PARTIALS chunks)
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
  logits_offset: u32,       // the row's first logit
  counts_offset: u32,       // the row's sequence's first count
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> next_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> history: array<u32>;
@group(0) @binding(3) var<storage, read_write> scratch: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> counts: array<u32>;
@group(0) @binding(5) var<storage, read> rows: array<Settings>;

override STAGE: u32 = 0u;
override PARTIALS: u32 = 1u;       // ceil(count / CHUNK), <= WORKGROUP_SIZE; set by the dispatcher
const WORKGROUP_SIZE: u32 = 256u;
const CHUNK: u32 = 2048u;          // kernels/model.h kSampleChunk
const BINS: u32 = 2048u;
const BINS_EACH: u32 = BINS / WORKGROUP_SIZE;
const CHUNK_EACH: u32 = CHUNK / WORKGROUP_SIZE;
const ZERO_BIN: u32 = BINS - 1u;   // d beyond the others: weight 0
const BIN_SCALE: f32 = 96.0;       // bins per nat
const CAPACITY: u32 = 1024u;       // kernels/model.h kSampleGathered
const ONE: f32 = 2147483648.0;     // the best's weight, 2^31
const LARGEST: f32 = 0x1.fffffep+127f;
const NO_CUT_KEY: u32 = 0u;        // with index NONE: a cut after every token (order keys of tokens are > 0)
const LEVELS: u32 = 10u;           // kernels/model.h kSampleLevels
const INDEX_BITS: u32 = 19u;       // a position's index part: indices < 2^19 (kernels/model.h kMaxSampleCount)
const INDEX_MASK: u32 = 0x7FFFFu;
const POSITION_BITS: u32 = 32u + INDEX_BITS;
const LAST_POSITION: vec2<u32> = vec2<u32>(0xFFFFFFFFu, 0x7FFFFu);  // 2^POSITION_BITS - 1
// A window's mode (see the header) and flags.
const FITS: u32 = 0u;
const BOUNDS: u32 = 1u;
const REFINE: u32 = 2u;
const K_PENDING: u32 = 1u;   // the top-k cut lies in the window (found by count)
const P_AFTER_K: u32 = 2u;   // top-p's cut is looked for once the top-k cut's order key is known
const GATHERED_ONCE: u32 = 4u;  // the window's tokens have been gathered
const WINDOW_WORDS: u32 = 16u;
// scratch, in words
const HIST: u32 = 0u;                                 // [LEVELS][BINS][count, weight: see bin_weight()]; level 0's:
                                                      // stage 1's bins of d, the others' sub-bins
const GATHERED_COUNT: u32 = LEVELS * 3u * BINS;
const BEST: u32 = GATHERED_COUNT + 1u;                // the best token's order key, from stage 1 on
const WINDOWS: u32 = BEST + 1u;                       // [LEVELS][WINDOW_WORDS]: each level's window
const KEY_BOUNDS: u32 = WINDOWS + LEVELS * WINDOW_WORDS;  // [LEVELS][largest key, ~smallest key] (atomicMax)
const GATHERED: u32 = KEY_BOUNDS + 2u * LEVELS;       // [CAPACITY][order key, index]
const CHUNK_BEST: u32 = GATHERED + 2u * CAPACITY;
override CHUNK_KEPT: u32 = CHUNK_BEST + PARTIALS;  // [PARTIALS][weight low, high]
override ROW_WORDS: u32 = CHUNK_KEPT + 2u * PARTIALS;  // a row's scratch (kernels::sample_candidates_words)
// Row wid.y's scratch starts at word scratch_base (an address only: nothing branches on it). The row's settings
// travel as an argument (s) instead: the uniformity analysis takes a private variable as possibly different in
// every invocation, and the windows built from the settings steer barriers.
var<private> scratch_base: u32;

var<workgroup> bin_low: array<atomic<u32>, BINS>;     // histograms: weight's low word
var<workgroup> bin_packed: array<atomic<u32>, BINS>;  // histograms: count + weight's high word << 16
var<workgroup> cand_key: array<u32, CAPACITY>;
var<workgroup> cand_index: array<u32, CAPACITY>;
var<workgroup> scan_count: array<u32, WORKGROUP_SIZE>;
var<workgroup> scan_low: array<u32, WORKGROUP_SIZE>;
var<workgroup> scan_high: array<u32, WORKGROUP_SIZE>;
var<workgroup> chunk_low: array<atomic<u32>, WORKGROUP_SIZE>;
var<workgroup> chunk_high: array<atomic<u32>, WORKGROUP_SIZE>;
var<workgroup> shared_u32: array<u32, 8>;  // a result found by one invocation, for all

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
fn min64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return select(b, a, less64(a, b));
}
fn max64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return select(a, b, less64(a, b));
}
// a >> s and a << s, s < 64 (WGSL takes shift amounts modulo 32: the cases keep them below).
fn shr64(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) {
    return a;
  }
  if (s >= 32u) {
    return vec2<u32>(a.y >> (s - 32u), 0u);
  }
  return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);
}
fn shl64(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) {
    return a;
  }
  if (s >= 32u) {
    return vec2<u32>(0u, a.x << (s - 32u));
  }
  return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));
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
// Token j of invocation lid's share of chunk wid: the loops over a chunk have a constant trip count, so that an
// invocation's loads are issued together rather than one latency after another.
fn chunk_token(wid: u32, lid: u32, j: u32) -> u32 {
  return wid * CHUNK + j * WORKGROUP_SIZE + lid;
}
fn valid(s: Settings, i: u32) -> bool {
  return i < s.count && !is_nan(logits[s.logits_offset + i]);
}

// Logit i (not NaN) after the penalties, infinities clamped to +-LARGEST.
fn logit(s: Settings, i: u32) -> f32 {
  var v = logits[s.logits_offset + i];
  if (penalized(s)) {  // without penalties every count leaves the logit as it is: not read
    let seen = counts[s.counts_offset + i];
    if (seen != 0u) {
      v = select(v * s.repetition_penalty, v / s.repetition_penalty, v > 0.0);
    }
    let generated = seen & 0x7fffffffu;
    if (generated != 0u) {
      v -= s.presence_penalty + s.frequency_penalty * f32(generated);
    }
  }
  return clamp(v, -LARGEST, LARGEST);
}
fn penalized(s: Settings) -> bool {
  return s.repetition_penalty != 1.0 || s.presence_penalty != 0.0 || s.frequency_penalty != 0.0;
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

// Token (key, index)'s position: larger comes first in sampling order.
fn position(key: u32, i: u32) -> vec2<u32> {
  return vec2<u32>((key << INDEX_BITS) | (INDEX_MASK - i), key >> (32u - INDEX_BITS));
}
fn position_key(p: vec2<u32>) -> u32 {
  return shr64(p, INDEX_BITS).x;
}

// Whether token (key a, index i) comes before (key b, index j) in sampling order, or is it.
fn at_or_before(a: u32, i: u32, b: u32, j: u32) -> bool {
  return a > b || (a == b && i <= j);
}

struct Weighed {
  bin: u32,
  weight: u32,
}
fn weigh(s: Settings, v: f32, best: f32) -> Weighed {
  let d = (best - v) * s.inv_temperature;
  let bin = u32(min(d * BIN_SCALE, f32(ZERO_BIN)));
  return Weighed(bin, select(u32(exp(-d) * ONE), 0u, bin == ZERO_BIN));
}

// The weight a kept token must reach: min-p's, and at least 1 (weight 0 is never drawn).
fn least_weight(s: Settings) -> u32 {
  return max(u32(s.min_p * ONE), 1u);
}
// top-p as a fraction of 2^24; 2^24: off.
fn top_p24(s: Settings) -> u32 {
  return min(u32(s.top_p * 16777216.0), 16777216u);
}

// ---- workgroup reductions and scans (called in uniform control flow) ----
// In GROUPS groups of GROUPS invocations, each group's first invocation walking its group: a few barriers, where
// a tree takes two a level (lavapipe compiles every barrier into a coroutine suspension: a stage with hundreds
// took minutes to compile).
const GROUPS: u32 = 16u;  // GROUPS * GROUPS = WORKGROUP_SIZE
var<workgroup> group_count: array<u32, GROUPS>;
var<workgroup> group_low: array<u32, GROUPS>;
var<workgroup> group_high: array<u32, GROUPS>;

fn max_all(lid: u32, value: u32) -> u32 {
  workgroupBarrier();  // the arrays' last readers are done
  scan_count[lid] = value;
  workgroupBarrier();
  if (lid < GROUPS) {
    var m = 0u;
    for (var j = lid * GROUPS; j < (lid + 1u) * GROUPS; j++) {
      m = max(m, scan_count[j]);
    }
    group_count[lid] = m;
  }
  workgroupBarrier();
  if (lid == 0u) {
    var m = 0u;
    for (var g = 0u; g < GROUPS; g++) {
      m = max(m, group_count[g]);
    }
    shared_u32[7] = m;
  }
  let result = workgroupUniformLoad(&shared_u32[7]);
  return result;
}

// Inclusive scans of every invocation's (count, weight) into scan_count / scan_low / scan_high.
fn scan(lid: u32, count: u32, weight: vec2<u32>) {
  workgroupBarrier();  // the arrays' last readers are done
  scan_count[lid] = count;
  scan_low[lid] = weight.x;
  scan_high[lid] = weight.y;
  workgroupBarrier();
  if (lid < GROUPS) {  // each group's inclusive scan, and its total
    var c = 0u;
    var w = vec2<u32>(0u, 0u);
    for (var j = lid * GROUPS; j < (lid + 1u) * GROUPS; j++) {
      c += scan_count[j];
      w = add64(w, vec2<u32>(scan_low[j], scan_high[j]));
      scan_count[j] = c;
      scan_low[j] = w.x;
      scan_high[j] = w.y;
    }
    group_count[lid] = c;
    group_low[lid] = w.x;
    group_high[lid] = w.y;
  }
  workgroupBarrier();
  if (lid == 0u) {  // the groups' totals into what comes before each group
    var c = 0u;
    var w = vec2<u32>(0u, 0u);
    for (var g = 0u; g < GROUPS; g++) {
      let total = vec2<u32>(group_low[g], group_high[g]);
      let count_here = group_count[g];
      group_count[g] = c;
      group_low[g] = w.x;
      group_high[g] = w.y;
      c += count_here;
      w = add64(w, total);
    }
  }
  workgroupBarrier();
  let g = lid / GROUPS;
  scan_count[lid] += group_count[g];
  let sum = add64(vec2<u32>(scan_low[lid], scan_high[lid]), vec2<u32>(group_low[g], group_high[g]));
  scan_low[lid] = sum.x;
  scan_high[lid] = sum.y;
  workgroupBarrier();
}
fn scanned_weight(lid: u32) -> vec2<u32> {
  return vec2<u32>(scan_low[lid], scan_high[lid]);
}

// The best token's order key over all chunks (0: every logit NaN): stage 1 reduces the chunks' and stores it
// for the later stages, which read it with stored_best().
fn global_best(lid: u32) -> u32 {
  var best = 0u;
  if (lid < PARTIALS) {
    best = atomicLoad(&scratch[scratch_base + CHUNK_BEST + lid]);
  }
  return max_all(lid, best);
}
fn stored_best(lid: u32) -> u32 {
  if (lid == 0u) {
    shared_u32[7] = atomicLoad(&scratch[scratch_base + BEST]);
  }
  return workgroupUniformLoad(&shared_u32[7]);
}

// Zeroes scratch[first, end), spread over the PARTIALS workgroups.
fn zero_words(wid: u32, lid: u32, first: u32, end: u32) {
  for (var j = first + wid * WORKGROUP_SIZE + lid; j < end; j += PARTIALS * WORKGROUP_SIZE) {
    atomicStore(&scratch[scratch_base + j], 0u);
  }
}

// ---- stage 0 ----
fn chunk_best(s: Settings, wid: u32, lid: u32) {
  var best = 0u;
  for (var j = 0u; j < CHUNK_EACH; j++) {
    let i = chunk_token(wid, lid, j);
    if (valid(s, i)) {
      best = max(best, order_key(logit(s, i)));
    }
  }
  let result = max_all(lid, best);
  if (lid == 0u) {
    atomicStore(&scratch[scratch_base + CHUNK_BEST + wid], result);
  }
  // Level 0's histogram, the count, the windows and key bounds; each level zeroes the next level's histogram.
  zero_words(wid, lid, HIST, hist_base(1u));
  zero_words(wid, lid, GATHERED_COUNT, GATHERED);
}

// ---- histograms: stage 1's bins of d, REFINE levels' sub-bins of positions ----
fn hist_base(level: u32) -> u32 {
  return HIST + level * 3u * BINS;
}
fn bin_count(base: u32, b: u32) -> u32 {
  return atomicLoad(&scratch[scratch_base + base + 3u * b]);
}
// A bin's weight is word 1 + word 2 * 2^24: each workgroup adds its own sum's low 24 bits to word 1 (at most
// PARTIALS * 2^24 in all) and the rest to word 2 (at most 2^31 * 2^19 / 2^24), so no add carries into another
// word and none waits for the value it replaced.
fn bin_weight(base: u32, b: u32) -> vec2<u32> {
  let low = atomicLoad(&scratch[scratch_base + base + 3u * b + 1u]);
  let high = atomicLoad(&scratch[scratch_base + base + 3u * b + 2u]);
  return add64(wide(low), vec2<u32>(high << 24u, high >> 8u));
}

// Adds this workgroup's tokens into the histogram at `base`: by bin of d (stage 1), or (refine) those in window
// `w` by sub-bin.
fn histogram(s: Settings, wid: u32, lid: u32, base: u32, best: f32, refine: bool, w: Window) {
  for (var b = lid; b < BINS; b += WORKGROUP_SIZE) {
    atomicStore(&bin_low[b], 0u);
    atomicStore(&bin_packed[b], 0u);
  }
  workgroupBarrier();
  for (var j = 0u; j < CHUNK_EACH; j++) {
    let i = chunk_token(wid, lid, j);
    if (valid(s, i)) {
      let v = logit(s, i);
      let t = weigh(s, v, best);
      var bin = t.bin;
      if (refine) {
        let p = position(order_key(v), i);
        bin = select(BINS, sub_bin(w, p), in_window(w, t.bin, p));
      }
      if (bin < BINS) {
        let old = atomicAdd(&bin_low[bin], t.weight);
        atomicAdd(&bin_packed[bin], 1u + select(0u, 0x10000u, old + t.weight < old));
      }
    }
  }
  workgroupBarrier();
  for (var b = lid; b < BINS; b += WORKGROUP_SIZE) {
    let packed = atomicLoad(&bin_packed[b]);
    if (packed != 0u) {  // the workgroup's weight in the bin: (packed >> 16) * 2^32 + low, below 2^42
      let low = atomicLoad(&bin_low[b]);
      atomicAdd(&scratch[scratch_base + base + 3u * b], packed & 0xFFFFu);
      atomicAdd(&scratch[scratch_base + base + 3u * b + 1u], low & 0xFFFFFFu);
      atomicAdd(&scratch[scratch_base + base + 3u * b + 2u], (low >> 24u) | ((packed >> 16u) << 8u));
    }
  }
}

// Scans the histogram at `base`, bins below `limit` (stage 1's: the zero bin left out), for find_bin().
// Each invocation's BINS_EACH bins are kept in cached_count / cached_weight for find_bin() (no second round trip).
var<private> cached_count: array<u32, BINS_EACH>;
var<private> cached_weight: array<vec2<u32>, BINS_EACH>;
fn scan_histogram(lid: u32, base: u32, limit: u32) {
  var count = 0u;
  var weight = vec2<u32>(0u, 0u);
  for (var j = 0u; j < BINS_EACH; j++) {
    let b = lid * BINS_EACH + j;
    let inside = b < limit;
    cached_count[j] = select(0u, bin_count(base, b), inside);
    cached_weight[j] = select(vec2<u32>(0u, 0u), bin_weight(base, b), inside);
    count += cached_count[j];
    weight = add64(weight, cached_weight[j]);
  }
  scan(lid, count, weight);
}

// The first bin below `limit` whose tokens, with those before, reach `goal` tokens (by_weight false) or weight
// (after scan_histogram() of the same histogram): its index, its count, and the count and weight before it, the
// same in every invocation.
struct Found {
  bin: u32,
  count: u32,
  count_before: u32,
  weight_before: vec2<u32>,
}
fn find_bin(lid: u32, limit: u32, by_weight: bool, goal: vec2<u32>) -> Found {
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
    for (var j = 0u; j < BINS_EACH && lid * BINS_EACH + j < limit; j++) {
      let b = lid * BINS_EACH + j;
      let c = cached_count[j];
      let w = cached_weight[j];
      if (!less64(select(wide(count + c), add64(weight, w), by_weight), goal)) {
        shared_found = Found(b, c, count, weight);
        break;
      }
      count += c;
      weight = add64(weight, w);
    }
  }
  return workgroupUniformLoad(&shared_found);
}

// ---- windows: tokens contiguous in sampling order, one of which is the cut ----
struct Window {
  mode: u32,                // FITS, BOUNDS or REFINE
  flags: u32,               // K_PENDING, P_AFTER_K, GATHERED_ONCE
  lo: u32,                  // the window's tokens are those in bins [lo, hi] (lo > hi: none, no cut) ...
  hi: u32,
  first: vec2<u32>,         // ... at positions [last, first]
  last: vec2<u32>,
  count_before: u32,        // tokens before the window in sampling order
  weight_before: vec2<u32>,
  p_total: vec2<u32>,       // the weight top-p's goal is a share of: all tokens' or, once known, top-k's
  count: u32,               // tokens in the window (at most)
  nonzero: u32,             // tokens of weight > 0 (bins before ZERO_BIN)
  shift: u32,               // REFINE: a position's sub-bin is (first >> shift) - (position >> shift)
}

fn in_window(w: Window, bin: u32, p: vec2<u32>) -> bool {
  return bin >= w.lo && bin <= w.hi && !less64(p, w.last) && !less64(w.first, p);
}
fn before_window(w: Window, bin: u32, p: vec2<u32>) -> bool {
  return bin < w.lo || (bin <= w.hi && less64(w.first, p));
}
fn sub_bin(w: Window, p: vec2<u32>) -> u32 {
  return sub64(shr64(w.first, w.shift), shr64(p, w.shift)).x;
}

var<workgroup> shared_found: Found;  // find_bin()'s result, for all
var<workgroup> shared_level: Level;  // load_level()'s, for all

fn store_window(level: u32, w: Window) {
  var words = array<u32, WINDOW_WORDS>(w.mode, w.flags, w.lo, w.hi, w.first.x, w.first.y, w.last.x, w.last.y,
                                       w.count_before, w.weight_before.x, w.weight_before.y, w.p_total.x,
                                       w.p_total.y, w.count, w.nonzero, w.shift);
  for (var j = 0u; j < WINDOW_WORDS; j++) {
    atomicStore(&scratch[scratch_base + WINDOWS + level * WINDOW_WORDS + j], words[j]);
  }
}
// Level `level`'s window mode alone (store_window's first word).
fn window_mode(level: u32) -> u32 {
  return atomicLoad(&scratch[scratch_base + WINDOWS + level * WINDOW_WORDS]);
}

// Level `level`'s window and key bounds, the same in every invocation.
struct Level {
  window: Window,
  largest: u32,              // BOUNDS: the largest order key in the window
  smallest_complement: u32,  // ... and ~ the smallest
}
fn load_level(lid: u32, level: u32) -> Level {
  if (lid == 0u) {
    var u: array<u32, WINDOW_WORDS>;
    for (var j = 0u; j < WINDOW_WORDS; j++) {
      u[j] = atomicLoad(&scratch[scratch_base + WINDOWS + level * WINDOW_WORDS + j]);
    }
    let w = Window(u[0], u[1], u[2], u[3], vec2<u32>(u[4], u[5]), vec2<u32>(u[6], u[7]), u[8],
                   vec2<u32>(u[9], u[10]), vec2<u32>(u[11], u[12]), u[13], u[14], u[15]);
    shared_level = Level(w, atomicLoad(&scratch[scratch_base + KEY_BOUNDS + 2u * level]),
                         atomicLoad(&scratch[scratch_base + KEY_BOUNDS + 2u * level + 1u]));
  }
  return workgroupUniformLoad(&shared_level);
}

// ---- level 0: the window from stage 1's histogram ----
// With top-k on, the bin of the k-th token; with top-p, the bins its cut may lie in (its goal depends on the top-k
// total, not known to the bin); small top-k sets are gathered whole. More than CAPACITY tokens: the top-k cut's
// bin (or top-p's) to be refined.
fn first_window(s: Settings, lid: u32) -> Window {
  scan_histogram(lid, HIST, ZERO_BIN);
  let nonzero = workgroupUniformLoad(&scan_count[WORKGROUP_SIZE - 1u]);
  let total = vec2<u32>(workgroupUniformLoad(&scan_low[WORKGROUP_SIZE - 1u]), workgroupUniformLoad(&scan_high[WORKGROUP_SIZE - 1u]));
  var w = Window(FITS, 0u, ZERO_BIN, ZERO_BIN - 1u, LAST_POSITION, vec2<u32>(0u, 0u), nonzero, total, total, 0u,
                 nonzero, 0u);
  let p = top_p24(s);
  if (s.top_k > 0u && s.top_k < nonzero) {
    let k = find_bin(lid, ZERO_BIN, false, wide(s.top_k));
    w.hi = k.bin;
    w.flags = K_PENDING;
    let through = k.count_before + k.count;
    if (through <= CAPACITY) {
      w.lo = 0u;
      w.count_before = 0u;
      w.weight_before = vec2<u32>(0u, 0u);
      w.count = through;
    } else {
      var first = k;
      if (p < 16777216u) {  // the top-k total is at least the weight before its bin
        first = find_bin(lid, ZERO_BIN, true, scale24(k.weight_before, p, true));
      }
      w.lo = first.bin;
      w.count_before = first.count_before;
      w.weight_before = first.weight_before;
      w.count = through - first.count_before;
      if (w.count > CAPACITY) {
        w.lo = k.bin;
        w.count_before = k.count_before;
        w.weight_before = k.weight_before;
        w.count = k.count;
        w.flags |= select(0u, P_AFTER_K, p < 16777216u);
        w.mode = BOUNDS;
      }
    }
  } else if (p < 16777216u) {
    let first = find_bin(lid, ZERO_BIN, true, scale24(total, p, true));
    w.lo = first.bin;
    w.hi = first.bin;
    w.count_before = first.count_before;
    w.weight_before = first.weight_before;
    w.count = first.count;
    w.mode = select(FITS, BOUNDS, first.count > CAPACITY);
  }
  return w;
}

// ---- levels 1 on: the window narrowed down ----
// The smallest shift at which the window's positions fall in at most BINS aligned blocks.
fn shift_for(w: Window) -> u32 {
  var s = 0u;
  while (s < POSITION_BITS && !less64(sub64(shr64(w.first, s), shr64(w.last, s)), wide(BINS))) {
    s++;
  }
  return s;
}

// After the top-k cut's window has come down to one order key, whose tokens weigh the same: the top-k total,
// and top-p's window from it, a bin of stage 1's histogram (in the top-k cut's bin: from its window's start on).
fn top_p_window(s: Settings, lid: u32, k: Window, best: f32) -> Window {
  let weight = weigh(s, key_value(position_key(k.first)), best).weight;
  let total = add64(k.weight_before, mul32(s.top_k - k.count_before, weight));
  scan_histogram(lid, HIST, ZERO_BIN);
  let f = find_bin(lid, ZERO_BIN, true, scale24(total, top_p24(s), true));
  let last = select(vec2<u32>(0u, 0u), k.last, f.bin == k.hi);
  return Window(select(BOUNDS, FITS, f.count <= CAPACITY), 0u, f.bin, f.bin, LAST_POSITION, last, f.count_before,
                f.weight_before, total, f.count, k.nonzero, 0u);
}

// What a window of known positions does next: fits (gathered), moves on to top-p's cut, or is refined.
fn settle(s: Settings, lid: u32, w: Window, best: f32) -> Window {
  var next = w;
  if ((w.flags & P_AFTER_K) != 0u) {
    if (position_key(w.first) == position_key(w.last)) {
      return top_p_window(s, lid, w, best);
    }
  } else if (w.count <= CAPACITY) {
    next.mode = FITS;
    return next;
  }
  next.mode = REFINE;
  next.shift = shift_for(w);
  return next;
}

// Level `level`'s window from the one before and its result.
fn advance(s: Settings, lid: u32, level: u32, loaded: Level, best: f32) -> Window {
  let previous = loaded.window;
  if (previous.mode == FITS) {
    return previous;
  }
  var w = previous;
  if (previous.mode == BOUNDS) {
    w.first = min64(w.first, position(loaded.largest, 0u));
    w.last = max64(w.last, position(~loaded.smallest_complement, INDEX_MASK));
  } else {
    let base = hist_base(level - 1u);
    scan_histogram(lid, base, BINS);
    let by_count = (previous.flags & K_PENDING) != 0u;
    let goal = select(sub64(scale24(previous.p_total, top_p24(s), true), previous.weight_before),
                      wide(s.top_k - previous.count_before), by_count);
    let f = find_bin(lid, BINS, !by_count, goal);
    w.count_before += f.count_before;
    w.weight_before = add64(w.weight_before, f.weight_before);
    w.count = f.count;
    let block = shl64(sub64(shr64(previous.first, previous.shift), wide(f.bin)), previous.shift);
    w.first = min64(previous.first, add64(block, sub64(shl64(wide(1u), previous.shift), wide(1u))));
    w.last = max64(previous.last, block);
  }
  return settle(s, lid, w, best);
}

// FITS: the window's tokens into GATHERED, and each chunk's kept weight before the window into CHUNK_KEPT.
fn gather(s: Settings, wid: u32, lid: u32, w: Window, best: f32) {
  let least = least_weight(s);
  var kept = vec2<u32>(0u, 0u);
  for (var j = 0u; j < CHUNK_EACH; j++) {
    let i = chunk_token(wid, lid, j);
    if (valid(s, i)) {
      let v = logit(s, i);
      let t = weigh(s, v, best);
      let key = order_key(v);
      let p = position(key, i);
      if (before_window(w, t.bin, p) && t.weight >= least) {
        kept = add64(kept, wide(t.weight));
      }
      if (in_window(w, t.bin, p)) {
        let slot = atomicAdd(&scratch[scratch_base + GATHERED_COUNT], 1u);
        if (slot < CAPACITY) {
          atomicStore(&scratch[scratch_base + GATHERED + 2u * slot], key);
          atomicStore(&scratch[scratch_base + GATHERED + 2u * slot + 1u], i);
        }
      }
    }
  }
  scan(lid, 0u, kept);
  if (lid == 0u) {
    atomicStore(&scratch[scratch_base + CHUNK_KEPT + 2u * wid], scan_low[WORKGROUP_SIZE - 1u]);
    atomicStore(&scratch[scratch_base + CHUNK_KEPT + 2u * wid + 1u], scan_high[WORKGROUP_SIZE - 1u]);
  }
}

// BOUNDS: the largest order key in the window and the complement of the smallest, into KEY_BOUNDS[level].
fn key_bounds(s: Settings, wid: u32, lid: u32, level: u32, w: Window, best: f32) {
  var largest = 0u;
  var smallest_complement = 0u;
  for (var j = 0u; j < CHUNK_EACH; j++) {
    let i = chunk_token(wid, lid, j);
    if (valid(s, i)) {
      let v = logit(s, i);
      let key = order_key(v);
      if (in_window(w, weigh(s, v, best).bin, position(key, i))) {
        largest = max(largest, key);
        smallest_complement = max(smallest_complement, ~key);
      }
    }
  }
  let workgroup_largest = max_all(lid, largest);
  let workgroup_smallest_complement = max_all(lid, smallest_complement);
  if (lid == 0u) {
    atomicMax(&scratch[scratch_base + KEY_BOUNDS + 2u * level], workgroup_largest);
    atomicMax(&scratch[scratch_base + KEY_BOUNDS + 2u * level + 1u], workgroup_smallest_complement);
  }
}

// Level `level` with its window `found`.
fn run_level(s: Settings, wid: u32, lid: u32, level: u32, best_key: u32, found: Window) {
  if (level + 1u < LEVELS) {  // written by the next level (if it works: a level after a gather does nothing)
    zero_words(wid, lid, hist_base(level + 1u), hist_base(level + 2u));
  }
  let best = key_value(best_key);
  var w = found;
  let gather_now = w.mode == FITS && (w.flags & GATHERED_ONCE) == 0u;
  if (gather_now) {
    w.flags |= GATHERED_ONCE;
  }
  if (wid == 0u && lid == 0u) {
    store_window(level, w);
  }
  if (best_key == 0u) {
    return;
  }
  if (gather_now) {
    gather(s, wid, lid, w, best);
  } else if (w.mode == BOUNDS) {
    key_bounds(s, wid, lid, level, w, best);
  } else if (w.mode == REFINE) {
    histogram(s, wid, lid, hist_base(level), best, true, w);
  }
}

// ---- stage 4: the cut ----
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

// The sorted slot at which the count of tokens (by_weight false) or their weight, with those before the window
// (r), reaches `goal`, into shared_u32[4], and its weight with all before it into shared_u32[5, 6]; `n` slots.
fn find_slot(s: Settings, lid: u32, by_weight: bool, goal: vec2<u32>, r: Window, n: u32, best: f32) {
  var weight = vec2<u32>(0u, 0u);
  for (var g = lid * GATHERED_EACH; g < (lid + 1u) * GATHERED_EACH && g < n; g++) {
    weight = add64(weight, wide(weigh(s, key_value(cand_key[g]), best).weight));
  }
  scan(lid, 0u, weight);
  var through = r.weight_before;
  if (lid > 0u) {
    through = add64(through, scanned_weight(lid - 1u));
  }
  var position = r.count_before + lid * GATHERED_EACH;  // the tokens before slot g
  for (var g = lid * GATHERED_EACH; g < (lid + 1u) * GATHERED_EACH && g < n; g++) {
    let previous = select(wide(position), through, by_weight);
    through = add64(through, wide(weigh(s, key_value(cand_key[g]), best).weight));
    position++;
    let reached = select(wide(position), through, by_weight);
    if (!less64(reached, goal) && less64(previous, goal)) {
      shared_u32[4] = g;
      shared_u32[5] = through.x;
      shared_u32[6] = through.y;
    }
  }
  workgroupBarrier();
}

// The cut among the gathered tokens (at most CAPACITY), those of window r.
fn cut_gathered(s: Settings, lid: u32, r: Window, best: f32) -> Cut {
  if (lid == 0u) {
    shared_u32[7] = min(atomicLoad(&scratch[scratch_base + GATHERED_COUNT]), CAPACITY);
  }
  let n = workgroupUniformLoad(&shared_u32[7]);
  var size = 1u;
  while (size < n) {
    size *= 2u;
  }
  for (var g = lid; g < size; g += WORKGROUP_SIZE) {
    cand_key[g] = select(0u, atomicLoad(&scratch[scratch_base + GATHERED + 2u * g]), g < n);
    cand_index[g] = select(NONE, atomicLoad(&scratch[scratch_base + GATHERED + 2u * g + 1u]), g < n);
  }
  workgroupBarrier();
  sort_gathered(lid, size);
  if (lid == 0u) {
    shared_u32[4] = n - 1u;
    shared_u32[5] = r.p_total.x;
    shared_u32[6] = r.p_total.y;
  }
  workgroupBarrier();
  if ((r.flags & K_PENDING) != 0u) {
    find_slot(s, lid, false, wide(s.top_k), r, n, best);
  }
  let k_slot = workgroupUniformLoad(&shared_u32[4]);
  let p = top_p24(s);
  if (p < 16777216u) {
    let total = vec2<u32>(workgroupUniformLoad(&shared_u32[5]), workgroupUniformLoad(&shared_u32[6]));
    find_slot(s, lid, true, scale24(total, p, true), r, n, best);
  }
  let slot = min(workgroupUniformLoad(&shared_u32[4]), k_slot);
  return Cut(cand_key[slot], cand_index[slot]);
}

// ---- stage 4: the draw ----
fn kept_weight(s: Settings, i: u32, best: f32, cut: Cut, least: u32) -> u32 {
  if (!valid(s, i)) {
    return 0u;
  }
  let v = logit(s, i);
  let w = weigh(s, v, best).weight;
  return select(0u, w, w >= least && at_or_before(order_key(v), i, cut.key, cut.index));
}

// The kept token of [first, end) (at most CHUNK tokens) at `mark`, in index order: each invocation sums a
// contiguous share of CHUNK_EACH, kept in registers, and the one whose share holds the mark walks it.
fn draw_span(s: Settings, lid: u32, first: u32, end: u32, mark: vec2<u32>, best: f32, cut: Cut) -> u32 {
  let least = least_weight(s);
  let start = first + lid * CHUNK_EACH;
  var weights: array<u32, CHUNK_EACH>;
  var sum = vec2<u32>(0u, 0u);
  for (var j = 0u; j < CHUNK_EACH; j++) {
    weights[j] = select(0u, kept_weight(s, start + j, best, cut, least), start + j < end);
    sum = add64(sum, wide(weights[j]));
  }
  scan(lid, 0u, sum);
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
    for (var j = 0u; j < CHUNK_EACH; j++) {
      through = add64(through, wide(weights[j]));
      if (weights[j] > 0u && less64(mark, through)) {
        shared_u32[7] = start + j;
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
fn random24(s: Settings) -> u32 {
  return mix(s.seed_lo ^ mix(s.seed_hi ^ mix(s.position ^ mix(0u)))) >> 8u;
}

fn draw_gathered(s: Settings, lid: u32, best: f32, cut: Cut) -> u32 {
  // The chunks' kept weight: before the window (the level that gathered), plus the gathered tokens kept.
  atomicStore(&chunk_low[lid], select(0u, atomicLoad(&scratch[scratch_base + CHUNK_KEPT + 2u * lid]), lid < PARTIALS));
  atomicStore(&chunk_high[lid], select(0u, atomicLoad(&scratch[scratch_base + CHUNK_KEPT + 2u * lid + 1u]), lid < PARTIALS));
  workgroupBarrier();
  let n = min(atomicLoad(&scratch[scratch_base + GATHERED_COUNT]), CAPACITY);
  let least = least_weight(s);
  for (var g = lid; g < n; g += WORKGROUP_SIZE) {
    let w = weigh(s, key_value(cand_key[g]), best).weight;
    if (w >= least && at_or_before(cand_key[g], cand_index[g], cut.key, cut.index)) {
      let chunk = cand_index[g] / CHUNK;
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
  let mark = scale24(total, random24(s), false);
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
  return draw_span(s, lid, chunk * CHUNK, min(chunk * CHUNK + CHUNK, s.count), chunk_mark, best, cut);
}

// The window the draw takes: the first level's whose tokens were gathered (FITS). The levels after it, and those a
// step leaves out because its settings cannot need them (kernels::sample_levels), keep their windows as stage 0
// zeroed them (mode FITS, nothing gathered). LEVELS is enough for every row: with
// none gathered, the last level's.
fn drawn_window(lid: u32) -> Window {
  if (lid == 0u) {
    var drawn = LEVELS - 1u;
    for (var level = 0u; level < LEVELS; level++) {
      if (window_mode(level) == FITS) {
        drawn = level;
        break;
      }
    }
    shared_u32[3] = drawn;
  }
  return load_level(lid, workgroupUniformLoad(&shared_u32[3])).window;
}

fn finish(s: Settings, lid: u32) {
  let best_key = stored_best(lid);
  let w = drawn_window(lid);
  var token = NONE;
  if (best_key != 0u) {
    let best = key_value(best_key);
    if (w.lo > w.hi) {
      token = draw_gathered(s, lid, best, Cut(NO_CUT_KEY, NONE));
    } else {
      token = draw_gathered(s, lid, best, cut_gathered(s, lid, w, best));
    }
  }
  if (lid == 0u) {
    next_ids[s.slot] = token;
    history[s.slot] = token;
    if (token < s.count && penalized(s)) {
      counts[s.counts_offset + token] += 1u;
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let s = rows[wid.y];  // the same in every invocation
  scratch_base = wid.y * ROW_WORDS;
  if (STAGE == 0u) {
    chunk_best(s, wid.x, lid);
  } else if (STAGE == 1u) {
    let best_key = global_best(lid);
    if (wid.x == 0u && lid == 0u) {
      atomicStore(&scratch[scratch_base + BEST], best_key);
    }
    if (best_key != 0u) {
      var unused: Window;
      histogram(s, wid.x, lid, HIST, key_value(best_key), false, unused);
    }
  } else if (STAGE == 2u) {
    let best_key = stored_best(lid);
    run_level(s, wid.x, lid, 0u, best_key, first_window(s, lid));
  } else if (STAGE == 3u) {
    // Level groups.x - PARTIALS + 1, one pipeline for all (lavapipe takes half a minute to compile one): the
    // dispatcher runs level L over PARTIALS + L - 1 workgroups, the first PARTIALS of which work.
    let level = groups.x - PARTIALS + 1u;
    if (wid.x >= PARTIALS) {
      return;
    }
    // Gathered already (or no cut): nothing to do. Only the previous level's mode is read, and this level's
    // window stays as stage 0 zeroed it, mode FITS, which the next level and the draw (drawn_window: the first
    // FITS level holds the gathered window) read as gathered before.
    if (lid == 0u) {
      shared_u32[0] = window_mode(level - 1u);
    }
    if (workgroupUniformLoad(&shared_u32[0]) == FITS) {
      return;
    }
    let previous = load_level(lid, level - 1u);
    let best_key = stored_best(lid);
    run_level(s, wid.x, lid, level, best_key, advance(s, lid, level, previous, key_value(best_key)));
  } else {
    finish(s, lid);
  }
}
