// Query-blocked flash attention for prefill (FlashAttention-2 forward, f32, workgroup memory only): the same
// attention as flash_attention.wgsl. Query t (position p = position_offset + t) attends keys j with
// first_key(p) <= j <= p (first_key: max(0, p - window + 1), window 0: no window), scores scaled by scale.
// Q [T, Hq * D], K / V [S, Hkv * D], out [T, Hq * D], f32 but K / V in the cache's KV_TYPE (kv_cache.wgsl:
// q8 times its row's scale as a tile is staged, f16 staged as it is and widened as it is read); D = HEAD_DIM =
// params.head_dim (any 1..256; even for f16, a multiple of 4 for q8).
//
// Work split. The rows of one kv head are the (query t, q head of its group) pairs, row = t * G + h % G with
// G = Hq / Hkv; a workgroup takes BLOCK_ROWS consecutive rows of one kv head, so all q heads sharing a K/V
// tile use it (GQA reuse), and walks the keys its rows see, [first_key(first row's p), last row's p], in
// tiles of TILE_KEYS (tiles past the causal diagonal or before the window are never visited). Blocks run
// latest first: the longest ones start first and the short ones fill the tail.
// Per tile, the 128 threads, as 8 row threads ty x 16 key threads tx:
//  1. score: thread (ty, tx) computes the scores of rows ty + 8i (i < ROWS_PER_THREAD) against keys
//     tx + 16j (j < KEYS_PER_THREAD) as dot products over D, its Q and K rows read 4 dims at a time from
//     workgroup memory (Q is staged once per block, pre-scaled; rows are DIM4 + 1 vec4 (an f16 tile's vec2)
//     apart, so the 16 key threads of a half-warp read 16 different bank groups and the 2 row threads of a warp
//     are broadcasts);
//     each read of 4 dims of Q serves KEYS_PER_THREAD keys and each of K ROWS_PER_THREAD rows, so 4 x 4 blocks
//     do twice the arithmetic per read of 4 x 2 (workgroup memory is what bounds this loop on an H100);
//  2. each thread writes its rows' max over its visible keys to `red`; after a barrier every thread reads
//     the 16 partial maxima of its rows (the same for all 16 key threads of a row), rescales its output and
//     its partial denominator by exp(old max - new max) and writes its weights exp(score - max) (0 where
//     masked) to p_s;
//  3. P V: thread (ty, tx) owns output rows ty + 8i and dims 4c .. 4c + 3 of vec4 columns c = tx + 16k
//     (k < COLS), accumulated in registers from vec4 reads of p_s (4 keys of a row) and of V rows.
// K and V share one staging buffer: each tile's V rows are loaded into registers while the scores are
// computed and stored over the K rows once the scores are done; the next tile's K rows are loaded into
// registers during P V. So global latency hides behind arithmetic and there are 4 barriers per tile.
// A tile is staged a cache word at a time, as the cache holds it (load_tile): each thread loads one u32 a step,
// consecutive threads consecutive words of a row, and stores it to workgroup memory only after the arithmetic
// it hides behind (store_tile): an f32 or q8 cache decoded there, q8 one load, one unpack and one scale load per
// four elements (where staging by element loaded and decoded a word per element); an f16 cache's words as they
// are (kv_h), half the bytes of f32, so 64-key tiles of head_dim 128 fit beside the queries and a read of 8 bytes
// gives 4 dims, each widened where it is read (by each of the 8 row threads that read it).
// A row's denominator is summed over its 16 key threads only at the end.
// Loops over D and over a tile's keys have run-time bounds (params) so compilers do not unroll them fully
// (lavapipe's LLVM takes minutes on big unrolled loops); loops over a thread's register blocks are small
// constants, unrolled so the blocks stay in registers.
// Masking: a row's keys outside [first_key(p), min(p, block's last position)] get weight 0; a row with no
// visible key yet keeps max LOWEST_F32 and rescales its zero sums by exp(0) = 1. Rows past T * G (last
// block) read zero queries and are never written.
// Workgroup memory (floats): (BLOCK_ROWS + TILE_KEYS) * 4 (DIM4 + 1) + BLOCK_ROWS * (TILE_KEYS + 4) +
// 16 BLOCK_ROWS (an f16 cache: TILE_KEYS * 2 (DIM4 + 1) for the tile), and the one element of the tile array
// not used (16 bytes), BLOCK_ROWS = 8 ROWS_PER_THREAD,
// TILE_KEYS = 16 KEYS_PER_THREAD; registers: STAGE cache words per thread (at most MAX_STAGE; twice as many
// elements for f16, four times for q8); kernels/model.cpp (flash_block_bytes, flash_block_stage_words,
// flash_block_shape) picks the blocking that fits the device.
// Split mode (SPLITS > 1, prompts deep in a long cache, whose blocks alone are too few to fill the GPU): the
// block's keys are cut into SPLITS chunks of whole tiles, chunk wid.z, and each row writes its unnormalised
// record [max, denominator, acc[head_dim]] for its keys in the chunk where flash_attention_combine.wgsl reads
// it (a row without keys there writes max LOWEST_F32 and zeros, which the combine weighs 0).
// Key j is the pool row the sequence's block table gives (kv_blocks.wgsl), read from the table once per staged
// tile (KV_BLOCK_TOKENS >= TILE_KEYS: at most two blocks).
// Bindings and params: those of flash_attention.wgsl (head_dim must equal HEAD_DIM; out holds the records in
// split mode; 4 kv_table, 5 params).
// Dispatch: (min(B, 65535), num_kv_heads, ceil(B / 65535)), B = ceil(T * G / BLOCK_ROWS) blocks;
// index = wid.x + wid.z * num_workgroups.x, block = B - 1 - index; split mode: (B, num_kv_heads, SPLITS),
// index = wid.x.

//!include flash_params.wgsl
//!include kv_cache.wgsl
//!include kv_blocks.wgsl

@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<u32>;
@group(0) @binding(2) var<storage, read> V: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> kv_table: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

override HEAD_DIM: u32 = 64u;
override ROWS_PER_THREAD: u32 = 4u;  // 1, 2 or 4
override KEYS_PER_THREAD: u32 = 2u;  // 1, 2 or 4
override SPLITS: u32 = 1u;

const WORKGROUP_SIZE: u32 = 128u;
const ROW_THREADS: u32 = 8u;
const KEY_THREADS: u32 = 16u;
const MAX_ROWS: u32 = 4u;    // ROWS_PER_THREAD at most
const MAX_KEYS: u32 = 4u;    // KEYS_PER_THREAD at most
const MAX_COLS: u32 = 4u;    // vec4 output columns per thread: D <= 256
const MAX_STAGE: u32 = 32u;  // staged K / V cache words per thread: 32 keys x 128 f32 dims, 16 x 256 or 64 x 128
                             // f16, / 128

// Derived, not set by the host.
override DIM4: u32 = (HEAD_DIM + 3u) / 4u;     // vec4s per head row
override ROW4: u32 = DIM4 + 1u;                // vec4s per staged Q / K / V row
override DPAD: u32 = 4u * DIM4;                // staged floats per row, zeros past HEAD_DIM
override BLOCK_ROWS: u32 = ROW_THREADS * ROWS_PER_THREAD;
override TILE_KEYS: u32 = KEY_THREADS * KEYS_PER_THREAD;
override P_ROW4: u32 = TILE_KEYS / 4u + 1u;    // vec4s per p_s row
override COLS: u32 = (DIM4 + KEY_THREADS - 1u) / KEY_THREADS;
override ROW_WORDS: u32 = DPAD / KV_PER_WORD;     // staged cache words per K / V row, zeros past HEAD_DIM
override STAGE: u32 = (TILE_KEYS * ROW_WORDS + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;  // words per thread

// The staged K rows, then V rows, [key][d4]: f32 values (kv_s) of an f32 or q8 cache; an f16 cache's own words
// (kv_h, a vec2<u32> holding 4 dims, widened as they are read), half the bytes, so a tile of twice the keys fits
// and each read of workgroup memory serves twice the dims. The other one is a single unused element.
override KV_F32_SLOTS: u32 = select(TILE_KEYS * ROW4, 1u, KV_TYPE == 1u);
override KV_F16_SLOTS: u32 = select(1u, TILE_KEYS * ROW4, KV_TYPE == 1u);
var<workgroup> q_s: array<vec4<f32>, BLOCK_ROWS * ROW4>;   // [row][d4], scaled queries
var<workgroup> kv_s: array<vec4<f32>, KV_F32_SLOTS>;
var<workgroup> kv_h: array<vec2<u32>, KV_F16_SLOTS>;
var<workgroup> p_s: array<vec4<f32>, BLOCK_ROWS * P_ROW4>; // [row][key / 4], softmax weights
var<workgroup> red: array<vec4<f32>, BLOCK_ROWS * 4u>;     // [row][key thread]: partial maxima, then sums

// A K or V tile in flight in a thread's registers, as the cache holds it: word n is the tile's word
// lid + WORKGROUP_SIZE n (zero past the tile's keys and HEAD_DIM) and, q8, scales[n] the scale of its row.
// Not used until it is stored (store_tile), so the loads stay in flight until then whatever the cache type.
struct Stage {
  words: array<u32, MAX_STAGE>,
  scales: array<f32, MAX_STAGE>,
}

// Loads rows start .. start + keys - 1 of K (is_value false) or V into this thread's stage, a cache word a step:
// word w of the tile is key w / ROW_WORDS, dims KV_PER_WORD * (w % ROW_WORDS) onward, so consecutive threads
// load consecutive words of a row. One u32 per thread and step, not a 16-byte vec4<u32>: a variant staging
// vec4<u32> words per thread measured slower on an H200 (issue 22). A word never spans two rows or kv heads: HEAD_DIM
// is a multiple of KV_PER_WORD (check_kv_type). q8: each word's thread reads its row's scale along with it (the
// threads of a row read the same address).
fn load_tile(stage: ptr<function, Stage>, lid: u32, is_value: bool, start: u32, keys: u32, kv_offset: u32) {
  let kv_stride = params.num_kv_heads * HEAD_DIM;
  let rows = tile_rows(0u, start, start + keys - 1u);
  for (var n: u32 = 0u; n < STAGE; n++) {
    let w = lid + n * WORKGROUP_SIZE;
    let k = w / ROW_WORDS;
    let d = (w % ROW_WORDS) * KV_PER_WORD;
    var word: u32 = 0u;
    var scale: f32 = 0.0;
    if (k < keys && d < HEAD_DIM) {
      let index = tile_row(rows, start + k) * kv_stride + kv_offset + d;
      if (is_value) {
        word = V[kv_word(index)];
      } else {
        word = K[kv_word(index)];
      }
      if (KV_TYPE == 2u) {  // q8: the row's scale, which follows the pool's data (kv_cache.wgsl)
        let scale_word = kv_scale_word(index, HEAD_DIM);
        if (is_value) {
          scale = bitcast<f32>(V[scale_word]);
        } else {
          scale = bitcast<f32>(K[scale_word]);
        }
      }
    }
    (*stage).words[n] = word;
    (*stage).scales[n] = scale;
  }
}

// Stores the staged words into workgroup memory: an f16 word as it is into kv_h (half a vec2), else its elements
// as f32 into kv_s (q8 times their row's scale): a q8 word fills a vec4 of a row, an f32 word one float.
fn store_tile(stage: ptr<function, Stage>, lid: u32) {
  for (var n: u32 = 0u; n < STAGE; n++) {
    let w = lid + n * WORKGROUP_SIZE;
    if (w < TILE_KEYS * ROW_WORDS) {
      let d = (w % ROW_WORDS) * KV_PER_WORD;
      let slot = (w / ROW_WORDS) * ROW4 + d / 4u;
      if (KV_TYPE == 1u) {
        kv_h[slot][(d / 2u) % 2u] = (*stage).words[n];
        continue;
      }
      let values = kv_unpack((*stage).words[n]);
      if (KV_TYPE == 2u) {
        kv_s[slot] = values * (*stage).scales[n];
      } else {
        for (var e: u32 = 0u; e < KV_PER_WORD; e++) {
          kv_s[slot][d % 4u + e] = values[e];
        }
      }
    }
  }
}

// Dims 4 d4 .. 4 d4 + 3 of a staged row, slot = key * ROW4 + d4.
fn staged(slot: u32) -> vec4<f32> {
  if (KV_TYPE == 1u) {
    let words = kv_h[slot];
    return vec4<f32>(unpack2x16float(words.x), unpack2x16float(words.y));
  }
  return kv_s[slot];
}

fn max4(v: vec4<f32>) -> f32 {
  return max(max(v.x, v.y), max(v.z, v.w));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let group = params.num_q_heads / params.num_kv_heads;
  let rows = params.T * group;
  let blocks = (rows + BLOCK_ROWS - 1u) / BLOCK_ROWS;
  let split_mode = SPLITS > 1u;
  let index = select(wid.x + wid.z * nwg.x, wid.x, split_mode);
  if (index >= blocks) {  // uniform over the workgroup: the barriers below stay in uniform control flow
    return;
  }
  let r0 = (blocks - 1u - index) * BLOCK_ROWS;
  let r_end = min(rows, r0 + BLOCK_ROWS);
  let kv_head = wid.y;
  let kv_offset = kv_head * HEAD_DIM;
  // The keys this workgroup walks: the block's, [first_key(first row's p), last row's p], or its chunk of them.
  var block_first = first_key(params.position_offset + r0 / group);
  var block_last = params.position_offset + (r_end - 1u) / group;
  if (split_mode) {
    let span = block_last + 1u - block_first;
    let chunk = (span + SPLITS * TILE_KEYS - 1u) / (SPLITS * TILE_KEYS) * TILE_KEYS;
    let chunk_first = block_first + wid.z * chunk;
    block_last = min(block_last, chunk_first + chunk - 1u);  // below chunk_first (none) past the block's keys
    block_first = chunk_first;
  }
  let scale = bitcast<f32>(params.scale_bits);
  let tx = lid % KEY_THREADS;
  let ty = lid / KEY_THREADS;

  for (var e = lid; e < BLOCK_ROWS * DPAD; e += WORKGROUP_SIZE) {
    let r = e / DPAD;
    let d = e % DPAD;
    var value: f32 = 0.0;
    if (r0 + r < r_end && d < HEAD_DIM) {
      let row = r0 + r;
      let head = kv_head * group + row % group;
      value = Q[((row / group) * params.num_q_heads + head) * HEAD_DIM + d] * scale;
    }
    q_s[r * ROW4 + d / 4u][d % 4u] = value;
  }

  var first: array<u32, MAX_ROWS>;  // per owned row: its visible keys in this block
  var last: array<u32, MAX_ROWS>;
  var row_max: array<f32, MAX_ROWS>;
  var row_sum: array<f32, MAX_ROWS>;  // over this thread's keys only
  var acc: array<array<vec4<f32>, MAX_COLS>, MAX_ROWS>;
  for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
    let position = params.position_offset + (r0 + ty + ROW_THREADS * i) / group;
    first[i] = first_key(position);
    last[i] = min(position, block_last);
    row_max[i] = LOWEST_F32;
    row_sum[i] = 0.0;
  }

  var stage: Stage;
  if (block_first <= block_last) {
    load_tile(&stage, lid, false, block_first, min(TILE_KEYS, block_last + 1u - block_first), kv_offset);
  }
  let dim4 = (params.head_dim + 3u) / 4u;  // DIM4, known only at run time: see the header
  for (var start = block_first; start <= block_last; start += TILE_KEYS) {
    let keys = min(TILE_KEYS, block_last + 1u - start);
    store_tile(&stage, lid);  // K rows
    workgroupBarrier();
    load_tile(&stage, lid, true, start, keys, kv_offset);  // V rows, in flight during the scores

    // Zeroed explicitly: a plain `var dots: ...;` here kept the previous tile's sums on lavapipe. Two partial
    // sums a pair (vec2), not four: 4 x 4 pairs of vec4 sums held 64 registers.
    var dots = array<array<vec2<f32>, MAX_KEYS>, MAX_ROWS>();
    for (var d4: u32 = 0u; d4 < dim4; d4++) {
      var k: array<vec4<f32>, MAX_KEYS>;
      for (var j: u32 = 0u; j < KEYS_PER_THREAD; j++) {
        k[j] = staged((tx + KEY_THREADS * j) * ROW4 + d4);
      }
      for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
        let q = q_s[(ty + ROW_THREADS * i) * ROW4 + d4];
        for (var j: u32 = 0u; j < KEYS_PER_THREAD; j++) {
          dots[i][j] = fma(q.zw, k[j].zw, fma(q.xy, k[j].xy, dots[i][j]));
        }
      }
    }
    var scores: array<array<f32, MAX_KEYS>, MAX_ROWS>;
    for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
      var m = LOWEST_F32;
      for (var j: u32 = 0u; j < KEYS_PER_THREAD; j++) {
        let key = start + tx + KEY_THREADS * j;
        let d = dots[i][j];
        scores[i][j] = d.x + d.y;
        if (key >= first[i] && key <= last[i]) {
          m = max(m, scores[i][j]);
        }
      }
      red[(ty + ROW_THREADS * i) * 4u + tx / 4u][tx % 4u] = m;
    }
    workgroupBarrier();

    for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
      let row = ty + ROW_THREADS * i;
      let base = row * 4u;
      let new_max = max(max(row_max[i], max(max4(red[base]), max4(red[base + 1u]))),
                        max(max4(red[base + 2u]), max4(red[base + 3u])));
      let rescale = exp(row_max[i] - new_max);
      row_max[i] = new_max;
      var sum: f32 = 0.0;
      for (var j: u32 = 0u; j < KEYS_PER_THREAD; j++) {
        let k = tx + KEY_THREADS * j;
        let key = start + k;
        let weight = select(0.0, exp(scores[i][j] - new_max), key >= first[i] && key <= last[i]);
        p_s[row * P_ROW4 + k / 4u][k % 4u] = weight;
        sum += weight;
      }
      row_sum[i] = row_sum[i] * rescale + sum;
      for (var c: u32 = 0u; c < COLS; c++) {
        acc[i][c] *= rescale;
      }
    }
    store_tile(&stage, lid);  // V rows over the K rows: the barrier above ends the scores
    workgroupBarrier();
    if (start + TILE_KEYS <= block_last) {  // the next tile's K rows, in flight during P V
      let next = start + TILE_KEYS;
      load_tile(&stage, lid, false, next, min(TILE_KEYS, block_last + 1u - next), kv_offset);
    }

    let key4 = (keys + 3u) / 4u;  // weights and V rows past `keys` are zeros
    for (var k4: u32 = 0u; k4 < key4; k4++) {
      var w: array<vec4<f32>, MAX_ROWS>;
      for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
        w[i] = p_s[(ty + ROW_THREADS * i) * P_ROW4 + k4];
      }
      let v_base = 4u * k4 * ROW4;
      for (var c: u32 = 0u; c < COLS; c++) {
        let col = min(tx + KEY_THREADS * c, DIM4 - 1u);  // columns past DIM4 are computed, never stored
        let v0 = staged(v_base + col);
        let v1 = staged(v_base + ROW4 + col);
        let v2 = staged(v_base + 2u * ROW4 + col);
        let v3 = staged(v_base + 3u * ROW4 + col);
        for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
          var a = acc[i][c];
          a = fma(vec4<f32>(w[i].x), v0, a);
          a = fma(vec4<f32>(w[i].y), v1, a);
          a = fma(vec4<f32>(w[i].z), v2, a);
          a = fma(vec4<f32>(w[i].w), v3, a);
          acc[i][c] = a;
        }
      }
    }
    workgroupBarrier();  // everyone is done with the tile (kv_s or kv_h), p_s and red before the next one
  }

  for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
    red[(ty + ROW_THREADS * i) * 4u + tx / 4u][tx % 4u] = row_sum[i];
  }
  workgroupBarrier();
  for (var i: u32 = 0u; i < ROWS_PER_THREAD; i++) {
    let r = ty + ROW_THREADS * i;
    let row = r0 + r;
    if (row >= r_end) {
      continue;
    }
    let s = red[r * 4u] + red[r * 4u + 1u] + red[r * 4u + 2u] + red[r * 4u + 3u];
    let denominator = (s.x + s.y) + (s.z + s.w);
    let head = kv_head * group + row % group;
    var out_base = ((row / group) * params.num_q_heads + head) * HEAD_DIM;
    var inv = 1.0 / denominator;
    if (split_mode) {  // [max, denominator, acc[HEAD_DIM]], unnormalised
      out_base = (((row / group) * params.num_q_heads + head) * SPLITS + wid.z) * (HEAD_DIM + 2u);
      if (tx == 0u) {
        out[out_base] = row_max[i];
        out[out_base + 1u] = denominator;
      }
      out_base += 2u;
      inv = 1.0;
    }
    for (var c: u32 = 0u; c < COLS; c++) {
      let col = tx + KEY_THREADS * c;
      if (col < DIM4) {
        let value = acc[i][c] * inv;
        for (var e: u32 = 0u; e < 4u; e++) {
          let d = 4u * col + e;
          if (d < HEAD_DIM) {
            out[out_base + d] = value[e];
          }
        }
      }
    }
  }
}
