// Flash attention, one workgroup per (query, q head) — decoding and prompts too short for the block kernel —
// on adapters with the `subgroups` feature: the contract, grid, bindings and split-KV records of
// flash_attention.wgsl, for head_dim a multiple of 4 and at most 32 x the smallest subgroup size (8 vec4 pieces per lane).
// flash_attention.wgsl scores one key per thread, so a thread walks a whole K row alone and a warp's loads
// touch 32 rows at once; here ROW_LANES lanes of a subgroup read a row together (row lane l holds the row's
// 16-byte words l, l + ROW_LANES, ...: coalesced) and add their partial dot products with a butterfly of
// subgroupShuffleXor. ROW_LANES is the row's words rounded up to a power of two, at most the smallest
// subgroup size, so a row narrower than a subgroup (head_dim 64 in f32: 16 words; an f16 cache halves them)
// does not leave lanes idle: a subgroup of 32 lanes reads 32 / ROW_LANES rows at once, one per row group.
// * row group g of the workgroup (ROW_LANES consecutive lanes) takes the keys g * KEYS .. + KEYS - 1 of every
//   round of ROW_GROUPS * KEYS keys, scores them, and keeps its own online softmax (running max, denominator)
//   and weighted sum of V in its lanes' registers: no barrier until the end;
// * a round issues its K and V loads together (the V rows do not wait for the scores), so it waits on
//   memory once, not twice: a decode step's attention is a chain of such waits, a few rounds long; KEYS (4 or
//   8, kernels/model.cpp flash_sg_keys) sets how many of the row group's loads are in flight per wait;
// * at the end the row groups of a subgroup are merged with shuffles (rescaled to the subgroup's max), then
//   the subgroups through workgroup memory, rescaled to the largest max.
// K and V are in the cache's KV_TYPE (kv_cache.wgsl), read as 16-byte words, WORDS per lane: row lane l loads
// each of its words l, l + ROW_LANES, ... once; an f32 word is one vec4 piece of a row, an f16 word two
// neighbouring pieces (8 elements, head_dim a multiple of 8 there). The V words of a round wait in registers as
// loaded (an f16 word in 4 registers, not 8) and are decoded as they are weighted.
// Key j is the pool row the sequence's block table gives (kv_blocks.wgsl): a row group keeps the rows of its
// current block in registers and reads the table again only when its KEYS keys reach another block (once per
// block, not per round; KV_BLOCK_TOKENS >= KEYS: a round's keys lie in at most two blocks).
// Bindings (group 0): 0 Q [T, Hq * head_dim] read, 1 K pool [blocks * KV_BLOCK_TOKENS, Hkv * head_dim] read,
//                     2 V pool (as K) read (K and V in KV_TYPE), 3 out [T, Hq * head_dim] (split mode: the
//                     partial records) read_write, 4 kv_table [ceil(S / KV_BLOCK_TOKENS)] u32 (the sequence's
//                     block ids) read, 5 params uniform.
// Dispatch: as flash_attention.wgsl: (min(T, 65535), num_q_heads, ceil(T / 65535)), or (T, num_q_heads,
// SPLITS) in split mode.
enable subgroups;

//!include flash_params.wgsl
//!include kv_cache.wgsl
//!include kv_blocks.wgsl

@group(0) @binding(0) var<storage, read> Q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> K: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> V: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> kv_table: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

override SPLITS: u32 = 1u;
override HEAD_DIM: u32 = 64u;       // params.head_dim, a multiple of 4, at most 256
override WORDS: u32 = 1u;           // 16-byte words of a row per lane, 1..8 (kernels/model.cpp flash_sg_lanes)
override ROW_LANES: u32 = 32u;      // lanes per row: a power of two, at most the smallest subgroup size
override MAX_SUBGROUPS: u32 = 8u;   // WORKGROUP_SIZE / the smallest subgroup size
override KEYS: u32 = 4u;            // keys a row group scores per round: 4 or 8 (MAX_KEYS)
const WORKGROUP_SIZE: u32 = 256u;
const MAX_KEYS: u32 = 8u;
override ROW_GROUPS: u32 = WORKGROUP_SIZE / ROW_LANES;

var<workgroup> maxes: array<f32, MAX_SUBGROUPS>;
var<workgroup> denominators: array<f32, MAX_SUBGROUPS>;
var<workgroup> sums: array<vec4<f32>, 64>;  // [HEAD_DIM / 4]

// vec4 pieces per 16-byte word of the cache: 1 (f32) or 2 (f16).
fn word_pieces() -> u32 {
  return select(1u, 2u, KV_TYPE == 1u);
}

// The row word that register word w of row lane l holds: l, l + ROW_LANES, ...; its pieces are
// word_pieces() * word + j, held in register pieces word_pieces() * w + j.
fn lane_word(l: u32, w: u32) -> u32 {
  return l + w * ROW_LANES;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {
  // The whole workgroup shares its query, so this return keeps the barriers in uniform control flow.
  let task = query_task(wid, nwg, SPLITS);
  if (task.t >= params.T) {
    return;
  }
  let D4 = HEAD_DIM / 4u;
  let pieces = word_pieces();
  let slots = WORDS * pieces;  // register pieces per lane, at most 8
  let row_words = D4 / pieces;
  let kv_stride = params.num_kv_heads * row_words;  // in 16-byte words
  let kv_offset = task.kv * row_words;
  let q_base = (task.t * params.num_q_heads + task.h) * D4;
  let first = task.first;  // the keys this workgroup covers: [first, last], empty when first > last
  let last = task.last;
  let scale = bitcast<f32>(params.scale_bits);
  let subgroup = lid / lanes;
  let subgroups = WORKGROUP_SIZE / lanes;
  let row_lane = lane % ROW_LANES;
  let row_group = subgroup * (lanes / ROW_LANES) + lane / ROW_LANES;

  // Row lane l holds the pieces of its words lane_word(l, w) (w < WORDS) of q (scaled), of the key rows and of
  // the sum.
  var q: array<vec4<f32>, 8>;
  for (var w = 0u; w < WORDS; w++) {
    let word = lane_word(row_lane, w);
    for (var j = 0u; j < pieces; j++) {
      if (word < row_words) {
        q[w * pieces + j] = Q[q_base + word * pieces + j] * scale;
      }
    }
  }
  var running_max = LOWEST_F32;
  var denominator: f32 = 0.0;
  var acc: array<vec4<f32>, 8>;
  var rows = TileRows(0u, 0u, 0u);
  var rows_block = 0xFFFFFFFFu;  // the block whose rows `rows` holds (none yet)
  // Rounds are walked by the whole workgroup (shuffles need uniform control flow); a row group whose
  // keys lie past `last` adds zeros.
  for (var round = first; round <= last; round += ROW_GROUPS * KEYS) {
    let base = round + row_group * KEYS;
    // Key r's partial score is partial[r / 4][r % 4]. Zeroed explicitly: a `var` without initializer in a loop
    // body is zeroed once, not every round, by this toolchain (lavapipe and the H200 both kept the previous
    // round's partial scores).
    var partial = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    // [key][word]; a lane past the row's words loads none and adds what its slots hold to sums that are never
    // stored.
    var v_words: array<array<vec4<u32>, 8>, MAX_KEYS>;
    let round_last = min(last, base + KEYS - 1u);
    if (base <= last && (base / KV_BLOCK_TOKENS != rows_block || round_last >= rows.boundary)) {
      rows = tile_rows(0u, base, round_last);
      rows_block = base / KV_BLOCK_TOKENS;
    }
    for (var r = 0u; r < KEYS; r++) {
      if (base + r <= last) {
        let row = tile_row(rows, base + r) * kv_stride + kv_offset;
        for (var w = 0u; w < WORDS; w++) {
          let word = lane_word(row_lane, w);
          if (word < row_words) {
            let k = K[row + word];
            v_words[r][w] = V[row + word];
            for (var j = 0u; j < pieces; j++) {
              partial[r / 4u][r % 4u] += dot(q[w * pieces + j], kv_piece(k, j));
            }
          }
        }
      }
    }
    var scores = partial;  // summed over the row group's lanes, which all get the sums
    for (var m = 1u; m < ROW_LANES; m *= 2u) {
      for (var k = 0u; k < KEYS / 4u; k++) {
        scores[k] += subgroupShuffleXor(scores[k], m);
      }
    }
    // With a valid key new_max is finite and the first rescale exp(-huge) = 0; with none it stays and
    // the rescale is 1.
    var new_max = running_max;
    for (var r = 0u; r < KEYS; r++) {
      if (base + r <= last) {
        new_max = max(new_max, scores[r / 4u][r % 4u]);
      }
    }
    let rescale = exp(running_max - new_max);
    denominator *= rescale;
    for (var i = 0u; i < slots; i++) {
      acc[i] *= rescale;
    }
    for (var r = 0u; r < KEYS; r++) {
      if (base + r <= last) {
        let weight = exp(scores[r / 4u][r % 4u] - new_max);
        denominator += weight;
        for (var w = 0u; w < WORDS; w++) {
          for (var j = 0u; j < pieces; j++) {
            acc[w * pieces + j] += weight * kv_piece(v_words[r][w], j);
          }
        }
      }
    }
    running_max = new_max;
  }

  // Merge the row groups of the subgroup into every lane of the same row lane, rescaled to the subgroup's max
  // (a group without keys has max LOWEST_F32 and nothing summed: its factor is 0 or it adds zeros).
  let subgroup_max = subgroupMax(running_max);
  let group_factor = exp(running_max - subgroup_max);
  running_max = subgroup_max;
  denominator *= group_factor;
  for (var i = 0u; i < slots; i++) {
    acc[i] *= group_factor;
  }
  for (var m = ROW_LANES; m < lanes; m *= 2u) {
    denominator += subgroupShuffleXor(denominator, m);
    for (var i = 0u; i < slots; i++) {
      acc[i] += subgroupShuffleXor(acc[i], m);
    }
  }

  // Merge the subgroups (their first row group): rescale each to the workgroup's max, as above, then add them
  // up one subgroup at a time.
  if (lane == 0u) {
    maxes[subgroup] = running_max;
  }
  for (var i = lid; i < D4; i += WORKGROUP_SIZE) {
    sums[i] = vec4<f32>(0.0);
  }
  workgroupBarrier();
  var workgroup_max = LOWEST_F32;
  for (var g = 0u; g < subgroups; g++) {
    workgroup_max = max(workgroup_max, maxes[g]);
  }
  let factor = exp(running_max - workgroup_max);
  if (lane == 0u) {
    denominators[subgroup] = denominator * factor;
  }
  for (var g = 0u; g < MAX_SUBGROUPS; g++) {
    if (g == subgroup && lane < ROW_LANES) {
      for (var w = 0u; w < WORDS; w++) {
        let word = lane_word(lane, w);
        for (var j = 0u; j < pieces; j++) {
          if (word < row_words) {
            sums[word * pieces + j] += acc[w * pieces + j] * factor;
          }
        }
      }
    }
    workgroupBarrier();
  }
  var total: f32 = 0.0;
  for (var g = 0u; g < subgroups; g++) {
    total += denominators[g];
  }
  if (lid >= D4) {
    return;
  }
  let sum = sums[lid];
  if (SPLITS > 1u) {
    // [max, denominator, acc[head_dim]], unnormalised, as flash_attention_combine.wgsl reads it.
    let record = partial_record(task, SPLITS, HEAD_DIM);
    for (var j = 0u; j < 4u; j++) {
      out[record + 2u + 4u * lid + j] = sum[j];
    }
    if (lid == 0u) {
      out[record] = workgroup_max;
      out[record + 1u] = total;
    }
  } else {
    let o = 4u * (q_base + lid);
    for (var j = 0u; j < 4u; j++) {
      out[o + j] = sum[j] / total;
    }
  }
}
