// Flash attention, one workgroup per (query, q head) — decoding and prompts too short for the block kernel —
// on adapters with the `subgroups` feature: the contract, grid, bindings and split-KV records of
// flash_attention.wgsl, for head_dim a multiple of 4 and at most 32 x the smallest subgroup size (PIECES <= 8).
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
//   memory once, not twice: a decode step's attention is a chain of such waits, a few rounds long;
// * at the end the row groups of a subgroup are merged with shuffles (rescaled to the subgroup's max), then
//   the subgroups through workgroup memory, rescaled to the largest max.
// K and V are in the cache's KV_TYPE (kv_cache.wgsl), read as 16-byte words, each loaded once: an f32 word is
// one vec4 piece of a row, an f16 word two neighbouring pieces, which a lane takes together (lane_piece), so
// head_dim is a multiple of 8 there. The V words of a round wait in registers as loaded (an f16 word in 4, not
// 8) and are decoded as they are weighted. On the H200 (2026-12-02, Qwen2.5-0.5B's f16 cache, tg128 at depths
// 0 / 2,048 / 8,192) this ran 1,037 / 806 / 761 tok/s against 989 / 774 / 706 when a lane loaded each f16 word
// once per piece, and 938 / 793 / 726 with f32's lane layout (each lane taking half of a word, twice the lanes
// a row).
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
override PIECES: u32 = 1u;          // vec4 pieces of a row per lane, 1..8 (kernels/model.cpp flash_sg_pieces)
override ROW_LANES: u32 = 32u;      // lanes per row: a power of two, at most the smallest subgroup size
override MAX_SUBGROUPS: u32 = 8u;   // WORKGROUP_SIZE / the smallest subgroup size
const WORKGROUP_SIZE: u32 = 256u;
const KEYS: u32 = 4u;               // keys a row group scores per step
override ROW_GROUPS: u32 = WORKGROUP_SIZE / ROW_LANES;

var<workgroup> maxes: array<f32, MAX_SUBGROUPS>;
var<workgroup> denominators: array<f32, MAX_SUBGROUPS>;
var<workgroup> sums: array<vec4<f32>, 64>;  // [HEAD_DIM / 4]

// Vec4 pieces per 16-byte word of the cache: 1 (f32) or 2 (f16).
fn word_pieces() -> u32 {
  return select(1u, 2u, KV_TYPE == 1u);
}

// The vec4 piece of a row that register slot i of row lane l holds: pieces l, l + ROW_LANES, ... of an f32
// cache; of an f16 one, whose 16-byte words hold two pieces, the pairs 2 l + (0, 1), 2 (l + ROW_LANES) + (0, 1),
// ...: slots w * word_pieces() + j hold the pieces of the lane's w-th word.
fn lane_piece(l: u32, i: u32) -> u32 {
  if (KV_TYPE == 0u) {
    return l + i * ROW_LANES;
  }
  return 2u * (l + (i / 2u) * ROW_LANES) + (i & 1u);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {
  // The whole workgroup shares its query, so this return keeps the barriers in uniform control flow.
  // An empty chunk (split mode) writes no record: the combine reads only the chunks with keys.
  let task = query_task(wid, nwg, SPLITS);
  if (task.t >= params.T || task.first > task.last) {
    return;
  }
  let D4 = HEAD_DIM / 4u;
  let pieces = word_pieces();
  let loads = PIECES / pieces;  // 16-byte words a lane loads per row
  let kv_stride = params.num_kv_heads * D4;
  let kv_offset = task.kv * D4;
  let q_base = (task.t * params.num_q_heads + task.h) * D4;
  let first = task.first;  // the keys this workgroup covers: [first, last]
  let last = task.last;
  let scale = bitcast<f32>(params.scale_bits);
  let subgroup = lid / lanes;
  let subgroups = WORKGROUP_SIZE / lanes;
  let row_lane = lane % ROW_LANES;
  let row_group = subgroup * (lanes / ROW_LANES) + lane / ROW_LANES;

  // Row lane l holds pieces lane_piece(l, i) (i < PIECES) of q (scaled), of the key rows and of the sum.
  var q: array<vec4<f32>, 8>;
  for (var i = 0u; i < PIECES; i++) {
    let d4 = lane_piece(row_lane, i);
    if (d4 < D4) {
      q[i] = Q[q_base + d4] * scale;
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
    // Zeroed explicitly: a `var` without initializer in a loop body is zeroed once, not every round, by
    // this toolchain (lavapipe and the H200 both kept the previous round's partial scores).
    var partial = vec4<f32>(0.0);
    // [key][word]; a lane past D4 loads none and adds what its slots hold to sums that are never stored.
    var v_words: array<array<vec4<u32>, 8>, KEYS>;
    let round_last = min(last, base + KEYS - 1u);
    if (base <= last && (base / KV_BLOCK_TOKENS != rows_block || round_last >= rows.boundary)) {
      rows = tile_rows(0u, base, round_last);
      rows_block = base / KV_BLOCK_TOKENS;
    }
    for (var r = 0u; r < KEYS; r++) {
      if (base + r <= last) {
        let row = tile_row(rows, base + r) * kv_stride + kv_offset;
        for (var n = 0u; n < loads; n++) {
          let d4 = lane_piece(row_lane, n * pieces);
          if (d4 < D4) {
            let word = kv_piece_word(row + d4);
            let k = K[word];
            v_words[r][n] = V[word];
            for (var j = 0u; j < pieces; j++) {
              partial[r] += dot(q[n * pieces + j], kv_piece(k, row + d4 + j));
            }
          }
        }
      }
    }
    var scores = partial;  // summed over the row group's lanes, which all get the sums
    for (var m = 1u; m < ROW_LANES; m *= 2u) {
      scores += subgroupShuffleXor(scores, m);
    }
    // With a valid key new_max is finite and the first rescale exp(-huge) = 0; with none it stays and
    // the rescale is 1.
    var new_max = running_max;
    for (var r = 0u; r < KEYS; r++) {
      if (base + r <= last) {
        new_max = max(new_max, scores[r]);
      }
    }
    let rescale = exp(running_max - new_max);
    denominator *= rescale;
    for (var i = 0u; i < PIECES; i++) {
      acc[i] *= rescale;
    }
    for (var r = 0u; r < KEYS; r++) {
      if (base + r <= last) {
        let weight = exp(scores[r] - new_max);
        denominator += weight;
        for (var n = 0u; n < loads; n++) {
          for (var j = 0u; j < pieces; j++) {
            acc[n * pieces + j] += weight * kv_piece(v_words[r][n], j);  // rows start at even pieces
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
  for (var i = 0u; i < PIECES; i++) {
    acc[i] *= group_factor;
  }
  for (var m = ROW_LANES; m < lanes; m *= 2u) {
    denominator += subgroupShuffleXor(denominator, m);
    for (var i = 0u; i < PIECES; i++) {
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
      for (var i = 0u; i < PIECES; i++) {
        let d4 = lane_piece(lane, i);
        if (d4 < D4) {
          sums[d4] += acc[i] * factor;
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
