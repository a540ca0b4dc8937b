// One (token, head) of the q|k|v split + q/k RMSNorm + rotary + KV-cache store, shared by qkv_rope_store.wgsl
// (rows of one sequence, positions position_offset + t) and rope_store_rows.wgsl (rows of several sequences, each
// with its own position and block table, from a row table). The including kernel declares WORKGROUP_SIZE, the
// bindings qkv, q_norm, k_norm, rope_table, q_out, k_cache, v_cache (kv_cache.wgsl words, pools of blocks),
// kv_table (kv_blocks.wgsl) and a uniform `params` with num_q_heads, num_kv_heads, head_dim, rotary_dim,
// use_qk_norm and eps_bits (qkv_rope_store.wgsl's Params). A q8 cache's rows are stored by store_head_q8.

const MAX_HEAD_DIM: u32 = 256u;

var<workgroup> head: array<f32, MAX_HEAD_DIM>;  // the head's input values: rotation pairs cross threads
//!include workgroup_reduce.wgsl
//!include kv_cache.wgsl
//!include kv_blocks.wgsl

// Element d of the head after the optional RMSNorm (inv_rms is 1 without it).
fn normed(d: u32, inv_rms: f32, is_q: bool) -> f32 {
  if (params.use_qk_norm == 0u) {
    return head[d];
  }
  let w = select(k_norm[d], q_norm[d], is_q);
  return head[d] * inv_rms * w;
}

// Dim d of the head after the norm and the rotation at `position`.
fn rotated(d: u32, inv_rms: f32, is_q: bool, position: u32) -> f32 {
  var value = normed(d, inv_rms, is_q);
  let half_rotary = params.rotary_dim / 2u;
  if (d < params.rotary_dim) {
    let first_half = d < half_rotary;
    let i = select(d - half_rotary, d, first_half);
    let angle = f32(position) * rope_table[i];
    let scale = rope_table[half_rotary];  // YaRN's / LongRoPE's attention factor, else 1
    let c = cos(angle) * scale;
    let s = sin(angle) * scale;
    if (first_half) {
      value = value * c - normed(d + half_rotary, inv_rms, is_q) * s;
    } else {
      value = value * c + normed(d - half_rotary, inv_rms, is_q) * s;
    }
  }
  return value;
}

fn abs_max4(x: vec4<f32>) -> f32 {
  let a = abs(x);
  return max(max(a.x, a.y), max(a.z, a.w));
}

// store_head for a q8 cache (kv_cache.wgsl): thread lid holds dims 4 lid .. 4 lid + 3 of the head, one cache
// word (head_dim <= 4 * WORKGROUP_SIZE, a multiple of 4), so each k / v row's absmax is one workgroup max away;
// thread 0 stores the two rows' scales. Call from uniform control flow (h is the workgroup's).
fn store_head_q8(t: u32, h: u32, position: u32, cache_row: u32, v_row: u32, inv_rms: f32, lid: u32) {
  let Hq = params.num_q_heads;
  let D = params.head_dim;
  let is_q = h < Hq;
  let d = 4u * lid;
  let holds_dims = d < D;
  var k = vec4<f32>(0.0);  // the q or k dims
  var v = vec4<f32>(0.0);
  if (holds_dims) {
    k = vec4<f32>(rotated(d, inv_rms, is_q, position), rotated(d + 1u, inv_rms, is_q, position),
                  rotated(d + 2u, inv_rms, is_q, position), rotated(d + 3u, inv_rms, is_q, position));
    if (!is_q) {
      v = vec4<f32>(qkv[v_row + d], qkv[v_row + d + 1u], qkv[v_row + d + 2u], qkv[v_row + d + 3u]);
    }
  }
  if (is_q) {
    if (holds_dims) {
      for (var c = 0u; c < 4u; c++) {
        q_out[(t * Hq + h) * D + d + c] = k[c];
      }
    }
    return;
  }
  let k_scale = kv_q8_scale(workgroup_max(lid, abs_max4(k)));
  let v_scale = kv_q8_scale(workgroup_max(lid, abs_max4(v)));
  if (holds_dims) {
    k_cache[kv_word(cache_row + d)] = kv_quantize(k, k_scale);
    v_cache[kv_word(cache_row + d)] = kv_quantize(v, v_scale);
  }
  if (lid == 0u) {
    k_cache[kv_scale_word(cache_row, D)] = bitcast<u32>(k_scale);
    v_cache[kv_scale_word(cache_row, D)] = bitcast<u32>(v_scale);
  }
}

// Head h (q heads first, then k heads: their order within the qkv row) of activation row t, at `position`: a q
// head to q_out[t, h]; k head j to cache element (row * Hkv + j) * head_dim, row = the pool row of `position` in
// the block table from entry table_base, and v head j beside it in v_cache. Call from uniform control flow (the
// whole workgroup shares the head).
fn store_head(t: u32, h: u32, position: u32, table_base: u32, lid: u32) {
  let Hq = params.num_q_heads;
  let Hkv = params.num_kv_heads;
  let is_q = h < Hq;
  let D = params.head_dim;
  let row = t * (Hq + 2u * Hkv) * D;

  var sum_sq: f32 = 0.0;
  for (var d = lid; d < D; d += WORKGROUP_SIZE) {
    let v = qkv[row + h * D + d];
    head[d] = v;
    sum_sq += v * v;
  }
  workgroupBarrier();
  var inv_rms: f32 = 1.0;
  if (params.use_qk_norm != 0u) {
    inv_rms = 1.0 / sqrt(workgroup_sum(lid, sum_sq) / f32(D) + bitcast<f32>(params.eps_bits));
  }

  let j = h - Hq;  // the kv head, for k heads
  let cache_row = (kv_row(table_base, position) * Hkv + j) * D;
  let v_row = row + (Hq + Hkv + j) * D;
  if (KV_TYPE == 2u) {
    store_head_q8(t, h, position, cache_row, v_row, inv_rms, lid);
    return;
  }
  let per_word = KV_PER_WORD;
  for (var w = lid; w * per_word < D; w += WORKGROUP_SIZE) {
    let d = w * per_word;
    let value = rotated(d, inv_rms, is_q, position);
    // The word's second element (f16 only: an f32 word holds one).
    let next = min(d + 1u, D - 1u);
    if (is_q) {
      q_out[(t * Hq + h) * D + d] = value;
      if (per_word == 2u) {
        q_out[(t * Hq + h) * D + d + 1u] = rotated(d + 1u, inv_rms, is_q, position);
      }
    } else {
      k_cache[kv_word(cache_row + d)] = kv_pack(value, rotated(next, inv_rms, is_q, position));
      v_cache[kv_word(cache_row + d)] = kv_pack(qkv[v_row + d], qkv[v_row + next]);
    }
  }
}
