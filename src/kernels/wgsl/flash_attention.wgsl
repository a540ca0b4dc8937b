// Flash attention: causal grouped-query attention with an online softmax and an optional sliding window,
//   out[t, h] = sum_j softmax_j(scale * Q[t, h] . K[j, kv]) V[j, kv],  kv = h / (num_q_heads / num_kv_heads),
// over the keys j with max(0, p - window + 1) <= j <= p, p = position_offset + t (window 0: all j <= p).
// One workgroup of 256 per (query t, q head). Keys go in tiles of 256, one key per thread: each thread scores
// its key, a workgroup max updates the running max, and the tile's weights p_j = exp(score_j - max) are
// shared through workgroup memory. For the weighted sum of V, thread i owns output dim i % head_dim for
// the tile keys k with k % (256 / head_dim) == i / head_dim, which keeps (nearly) all threads busy at any
// head_dim; accumulators (and each thread's share of the softmax denominator) are rescaled whenever the max grows,
// and the key subsets' partial outputs are added up at the end. Nothing is sized by S. head_dim <= 256.
// A q8 cache (kv_cache.wgsl) scales each key's score by its row's scale once, and each value element by its own.
// Key j is row j of the sequence in the cache pools: the pool row its block table gives (kv_blocks.wgsl), read
// from the table once per tile (KV_BLOCK_TOKENS >= TILE: a tile's keys lie in at most two blocks).
// Bindings (group 0): 0 Q [T, Hq * head_dim] read, 1 K pool [blocks * KV_BLOCK_TOKENS, Hkv * head_dim] read,
//                     2 V pool (as K) read (K and V in the cache's KV_TYPE, kv_cache.wgsl), 3 out [T, Hq *
//                     head_dim] read_write, 4 kv_table [ceil(S / KV_BLOCK_TOKENS)] u32 (the sequence's block
//                     ids) read, 5 params uniform (scale as f32 bits).
// Dispatch: (min(T, 65535), num_q_heads, ceil(T / 65535)); query t = wid.x + wid.z * num_workgroups.x.
//
// Split-KV mode (SPLITS > 1, for decoding over a long cache: flash-decoding). The dispatch is (T, num_q_heads,
// SPLITS) and workgroup z covers the z-th of SPLITS equal chunks (whole multiples of CHUNK_GRANULE keys) of its
// query's visible keys, so a short S leaves the last chunks empty and the same grid serves every S up to the
// cache capacity. It writes an unnormalised partial record to `out` (then a scratch buffer) at
// ((t * num_q_heads + h) * SPLITS + z) * (head_dim + 2): [running max, softmax denominator, acc[head_dim]];
// an empty chunk writes none. flash_attention_combine.wgsl merges the records of the chunks with keys.

//!include flash_params.wgsl
//!include kv_cache.wgsl
//!include kv_blocks.wgsl

@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> K: array<u32>;
@group(0) @binding(2) var<storage, read> V: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> kv_table: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

override SPLITS: u32 = 1u;

const WORKGROUP_SIZE: u32 = 256u;
const TILE: u32 = WORKGROUP_SIZE;  // keys per tile, one per thread
const MAX_HEAD_DIM: u32 = WORKGROUP_SIZE;

var<workgroup> q: array<f32, MAX_HEAD_DIM>;
var<workgroup> weights: array<f32, TILE>;
//!include workgroup_reduce.wgsl

// Key element e as stored: a q8 key's integer, its row's scale applied to the whole score (key_scale).
fn key_at(e: u32) -> f32 {
  return kv_element(K[kv_word(e)], e);
}

// The scale of the key row holding element e: q8's row scale, 1 for f32 / f16.
fn key_scale(e: u32) -> f32 {
  if (KV_TYPE == 2u) {
    return bitcast<f32>(K[kv_scale_word(e, params.head_dim)]);
  }
  return 1.0;
}

// Value element e (q8: times its row's scale).
fn value_at(e: u32) -> f32 {
  let value = kv_element(V[kv_word(e)], e);
  if (KV_TYPE == 2u) {
    return value * bitcast<f32>(V[kv_scale_word(e, params.head_dim)]);
  }
  return value;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its query, so this return keeps the barriers in uniform control flow. An empty
  // chunk (split mode) writes no record: the combine reads only the chunks with keys (chunks_with_keys).
  let task = query_task(wid, nwg, SPLITS);
  if (task.t >= params.T || task.first > task.last) {
    return;
  }
  let D = params.head_dim;
  let kv_stride = params.num_kv_heads * D;
  let kv_offset = task.kv * D;
  let q_base = (task.t * params.num_q_heads + task.h) * D;
  let first = task.first;  // the keys this workgroup covers: [first, last]
  let last = task.last;
  let scale = bitcast<f32>(params.scale_bits);

  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    q[d] = Q[q_base + d];
  }
  workgroupBarrier();

  // Thread lid adds up output dim lid % D over the tile keys k with k % splits == lid / D; threads with
  // lid / D >= splits only score keys.
  let splits = WORKGROUP_SIZE / D;
  let dim = lid % D;
  let split = lid / D;
  var running_max = LOWEST_F32;
  var denominator: f32 = 0.0;  // this thread's keys' share of the softmax denominator
  var acc: f32 = 0.0;
  for (var start = first; start <= last; start += TILE) {
    let j = start + lid;
    let valid = j <= last;
    let rows = tile_rows(0u, start, min(last, start + TILE - 1u));
    var score = LOWEST_F32;
    if (valid) {
      let k_base = tile_row(rows, j) * kv_stride + kv_offset;
      // Four dims per step (and a scalar tail), so that several independent loads are in flight.
      var qk: f32 = 0.0;
      var d: u32 = 0u;
      for (; d + 4u <= D; d += 4u) {
        let k4 = vec4<f32>(key_at(k_base + d), key_at(k_base + d + 1u), key_at(k_base + d + 2u), key_at(k_base + d + 3u));
        qk += dot(vec4<f32>(q[d], q[d + 1u], q[d + 2u], q[d + 3u]), k4);
      }
      for (; d < D; d++) {
        qk += q[d] * key_at(k_base + d);
      }
      score = qk * scale * key_scale(k_base);
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
    if (split < splits) {
      // Four keys per step (and a tail), again for independent loads.
      let v_base = kv_offset + dim;
      var k = split;
      for (; k + 3u * splits < keys; k += 4u * splits) {
        let v = vec4<f32>(value_at(v_base + tile_row(rows, start + k) * kv_stride),
                          value_at(v_base + tile_row(rows, start + k + splits) * kv_stride),
                          value_at(v_base + tile_row(rows, start + k + 2u * splits) * kv_stride),
                          value_at(v_base + tile_row(rows, start + k + 3u * splits) * kv_stride));
        let p = vec4<f32>(weights[k], weights[k + splits], weights[k + 2u * splits], weights[k + 3u * splits]);
        a += dot(p, v);
      }
      for (; k < keys; k += splits) {
        a += weights[k] * value_at(v_base + tile_row(rows, start + k) * kv_stride);
      }
    }
    acc = a;
    workgroupBarrier();  // everyone is done with `weights` before the next tile overwrites them
  }

  let total = workgroup_sum(lid, denominator);
  partial[lid] = select(0.0, acc, split < splits);
  workgroupBarrier();
  if (lid < D) {
    var sum: f32 = 0.0;
    for (var s: u32 = 0u; s < splits; s++) {
      sum += partial[s * D + lid];
    }
    if (SPLITS > 1u) {
      let record = partial_record(task, SPLITS, D);
      out[record + 2u + lid] = sum;
      if (lid == 0u) {
        out[record] = running_max;
        out[record + 1u] = total;
      }
    } else {
      out[q_base + lid] = sum / total;
    }
  }
}
