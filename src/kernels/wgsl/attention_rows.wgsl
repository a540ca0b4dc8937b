// Decode attention for the rows of several sequences in one dispatch: table entry i (row_table.wgsl) is one
// query, activation row `row` of Q at `position` of its sequence, which attends the keys j of its own sequence
// (the pool rows its block table gives: kv_table from entry `table_base`, kv_blocks.wgsl) with
// max(0, position - window + 1) <= j <= position, causal GQA as flash_attention.wgsl computes it:
//   out[row, h] = sum_j softmax_j(scale * Q[row, h] . K[j, kv]) V[j, kv],  kv = h / (num_q_heads / num_kv_heads).
// One workgroup of 256 per (entry, q head); keys in tiles of 256, one key per thread, its row read as 16-byte
// words (whole vec4 pieces: head_dim a multiple of 4, of 8 for an f16 cache; a q8 word's four u32 are four
// pieces, possibly of two rows, each scaled by its row's scale); the tile's weights go through
// workgroup memory, and for the weighted sum of V thread i owns piece i % (head_dim / 4) of the output for the
// tile keys k with k % (1024 / head_dim) == i / (head_dim / 4), so a V row is read by consecutive threads. An
// online softmax rescales the sums whenever the max grows. Nothing is sized by the cache length. A tile's rows
// come from the block table once per tile (KV_BLOCK_TOKENS >= TILE: at most two blocks).
// Bindings (group 0): 0 Q [*, Hq * head_dim] read, 1 K pool, 2 V pool (KV_TYPE, kv_cache.wgsl; blocks of
//                     KV_BLOCK_TOKENS rows of Hkv * head_dim) read, 3 out [*, Hq * head_dim] read_write,
//                     4 table [T] RowEntry read, 5 kv_table (every sequence's block ids) u32 read, 6 params
//                     uniform (flash_params.wgsl's: T the table's entries; S and position_offset unused).
// Dispatch: (T, num_q_heads, 1). head_dim <= 256.

//!include flash_params.wgsl
//!include kv_cache.wgsl
//!include row_table.wgsl
//!include kv_blocks.wgsl

@group(0) @binding(0) var<storage, read> Q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> K: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> V: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> table: array<RowEntry>;
@group(0) @binding(5) var<storage, read> kv_table: array<u32>;
@group(0) @binding(6) var<uniform> params: Params;

override HEAD_DIM: u32 = 64u;  // params.head_dim
const WORKGROUP_SIZE: u32 = 256u;
const TILE: u32 = WORKGROUP_SIZE;  // keys per tile, one per thread
const MAX_PIECES: u32 = 64u;       // vec4 pieces of the largest head

var<workgroup> q: array<vec4<f32>, MAX_PIECES>;
var<workgroup> weights: array<f32, TILE>;
var<workgroup> sums: array<vec4<f32>, WORKGROUP_SIZE>;
//!include workgroup_reduce.wgsl

// Piece p (vec4 index) of the K (cache 0) or V pool as stored: q8 integers, not yet times their row's scale.
fn piece_at(cache: u32, p: u32) -> vec4<f32> {
  if (cache == 0u) {
    return kv_piece(K[kv_piece_word(p)], p);
  }
  return kv_piece(V[kv_piece_word(p)], p);
}

// The scale of the K (cache 0) or V row holding piece p: q8's row scale (kv_cache.wgsl), 1 for f32 / f16.
fn row_scale(cache: u32, p: u32) -> f32 {
  if (KV_TYPE != 2u) {
    return 1.0;
  }
  let w = kv_scale_word(4u * p, HEAD_DIM);
  if (cache == 0u) {
    return bitcast<f32>(K[w / 4u][w % 4u]);
  }
  return bitcast<f32>(V[w / 4u][w % 4u]);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its query, so this return keeps the barriers in uniform control flow.
  if (wid.x >= params.T) {
    return;
  }
  let entry = table[wid.x];
  let h = wid.y;
  let D4 = HEAD_DIM / 4u;
  let kv = h / (params.num_q_heads / params.num_kv_heads);
  let kv_stride = params.num_kv_heads * D4;  // pieces per cache row
  let kv_offset = kv * D4;
  let q_base = (entry.row * params.num_q_heads + h) * D4;
  let scale = bitcast<f32>(params.scale_bits);
  let first = first_key(entry.position);
  let last = entry.position;

  for (var d = lid; d < D4; d += WORKGROUP_SIZE) {
    q[d] = Q[q_base + d] * scale;
  }
  workgroupBarrier();

  let splits = WORKGROUP_SIZE / D4;  // keys whose V rows are read at once
  let piece = lid % D4;
  let split = lid / D4;
  var running_max = LOWEST_F32;
  var denominator: f32 = 0.0;  // this thread's keys' share of the softmax denominator
  var acc = vec4<f32>(0.0);
  for (var start = first; start <= last; start += TILE) {
    let j = start + lid;
    let valid = j <= last;
    let rows = tile_rows(entry.table_base, start, min(last, start + TILE - 1u));
    var score = LOWEST_F32;
    if (valid) {
      let k_row = kv_offset + tile_row(rows, j) * kv_stride;
      var qk: f32 = 0.0;
      for (var d = 0u; d < D4; d++) {
        qk += dot(q[d], piece_at(0u, k_row + d));
      }
      score = qk * row_scale(0u, k_row);
    }
    // The tile has a valid key, so new_max is finite; on the first tile the rescale is exp(-huge) = 0.
    let new_max = max(running_max, workgroup_max(lid, score));
    let rescale = exp(running_max - new_max);
    let weight = select(0.0, exp(score - new_max), valid);
    weights[lid] = weight;
    denominator = denominator * rescale + weight;
    running_max = new_max;
    workgroupBarrier();

    let keys = min(TILE, last + 1u - start);
    var a = acc * rescale;
    if (split < splits) {  // threads past the last whole split (head_dim not dividing 1024) only score keys
      let v_base = kv_offset + piece;
      for (var k = split; k < keys; k += splits) {
        let p = v_base + tile_row(rows, start + k) * kv_stride;
        a += (weights[k] * row_scale(1u, p)) * piece_at(1u, p);
      }
    }
    acc = a;
    workgroupBarrier();  // everyone is done with `weights` before the next tile overwrites them
  }

  let total = workgroup_sum(lid, denominator);
  sums[lid] = select(vec4<f32>(0.0), acc, split < splits);
  workgroupBarrier();
  if (lid < D4) {
    var sum = vec4<f32>(0.0);
    for (var s: u32 = 0u; s < splits; s++) {
      sum += sums[s * D4 + lid];
    }
    out[q_base + lid] = sum / total;
  }
}
