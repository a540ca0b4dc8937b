// One (token, head) of the q|k|v split + q/k RMSNorm + rotary + KV-cache store, shared by qkv_rope_store.wgsl
// (rows of one sequence, positions position_offset + t) and rope_store_rows.wgsl (rows of several sequences, each
// with its own position and block table, from a row table). The including kernel declares WORKGROUP_SIZE, the
// bindings qkv, q_norm, k_norm, inv_freq, q_out, k_cache, v_cache (kv_cache.wgsl words, pools of blocks),
// kv_table (kv_blocks.wgsl) and a uniform `params` with num_q_heads, num_kv_heads, head_dim, rotary_dim,
// use_qk_norm and eps_bits (qkv_rope_store.wgsl's Params).

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
    let angle = f32(position) * inv_freq[i];
    let c = cos(angle);
    let s = sin(angle);
    if (first_half) {
      value = value * c - normed(d + half_rotary, inv_rms, is_q) * s;
    } else {
      value = value * c + normed(d - half_rotary, inv_rms, is_q) * s;
    }
  }
  return value;
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
  let per_word = kv_per_word();
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
